"""How one kernel's stored history (``KernelHistory``) and the steps along a line (``StepsReport``) show
themselves in a notebook: a one-line ``repr`` and a small HTML table, every name escaped
(``display.html_table``). The ``.table`` DataFrames are the objects' own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbase.analysis.names import display_map, short_id
from kbase.comparison.result import history_changes
from kbase.display import clip, html_table, inert
from kbase.render.notebook.comparison import TOP, finite
from kbase.units import ABSENT, column_unit, fmt_delta_pct, fmt_ns

if TYPE_CHECKING:
    from kbase.comparison.history import StepsReport
    from kbase.comparison.result import KernelHistory



def history_line(h: KernelHistory) -> str:
    where = f" ({h.workload})" if h.workload else " (every workload)"
    head = f"<KernelHistory {clip(h.short_name, 60)} {short_id(h.name)}{where}: {len(h.rows)} baseline(s)"
    if h.rows:
        last, change = h.rows[-1], history_changes(h.rows)[-1]
        head += (f"; newest @{last['id']} ({str(last['commit'])[:12]}) {fmt_ns(last['per_iter_ns'])} per iteration "
                 f"per GPU ({fmt_delta_pct(change)} vs the previous)")
    return inert(head + ">")


def history_html(h: KernelHistory) -> str:
    rows = h.rows[-TOP:]
    changes = history_changes(h.rows)[-TOP:]
    per_iter = column_unit(r["per_iter_ns"] for r in rows)
    avg = column_unit(r["avg_ns"] for r in rows)
    cells = [(f"@{r['id']}", str(r["commit"])[:12], _day(r.get("commit_date")), clip(r.get("subject") or "", 60),
              f"{r['count']:,}", avg(r["avg_ns"]), per_iter(r["per_iter_ns"]), fmt_delta_pct(ch))
             for r, ch in zip(rows, changes)]
    notes = [f"the newest {len(rows)} of {len(h.rows)}: .table has every row"] if len(h.rows) > len(rows) else []
    return html_table(["id", "commit", "date", "subject", "launches", "avg", "per iter/GPU", "Δ vs prev"], cells,
                      caption=history_line(h)[1:-1], notes=[f"kernel: {h.name}", *notes], numeric=(4, 5, 6, 7))


def _day(value: Any) -> str:
    return value.strftime("%Y-%m-%d") if hasattr(value, "strftime") else str(value or ABSENT)[:10]


# ------------------------------------------------------------------------------------------ steps


def steps_line(r: StepsReport) -> str:
    head = (f"<StepsReport {r.workload}: {len(r.steps)} step(s) over {r.baselines} baseline(s), "
            f"{len(r.commits)} commit(s)")
    if r.steps:
        s = r.steps[0]
        head += f"; largest: {s.kind} {clip(s.short_name, 50)} {s.rel:+.1%} at {s.first_commit[:12]}"
    return inert(head + ">")


def steps_html(r: StepsReport) -> str:
    shown = r.steps[:TOP]
    unit = column_unit(v for s in shown for v in (s.before_ns, s.after_ns))
    labels = display_map([(s.name, s.short_name) for s in r.steps])
    cells = []
    for s in shown:
        note = r.commit_notes.get(s.first_commit)
        cells.append((s.kind, labels[s.name], s.first_commit[:12], _day(note.date if note else None),
                      clip(note.subject if note else "", 60), unit(s.before_ns), unit(s.after_ns), f"{s.rel:+.1%}",
                      "-" if not finite(s.effect) else f"{s.effect:+.2%}"))
    notes = list(r.notes) + ([f"{len(r.steps) - len(shown)} more: .table has every step"]
                             if len(r.steps) > len(shown) else [])
    return html_table(["kind", "kernel", "commit", "date", "subject", "before/iter", "after/iter", "change",
                       "effect on iter"], cells, caption=steps_line(r)[1:-1], notes=notes, numeric=(5, 6, 7, 8))
