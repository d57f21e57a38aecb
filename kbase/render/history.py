"""Render one kernel's history: a sparkline per workload, a table (one baseline a row, with the change
against the previous baseline of the same workload), JSON (schema ``kbase.history/1``) and CSV, each with
the kernel's detected steps.

The table is a list of ``layout.Column`` specs and rows keyed by them: another column (e.g. a detected
step) slots in with its own priority, another section prints after ``print_history``'s table.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kbase import jsonable
from kbase.analysis.names import short_id
from kbase.render.baselines import SUBJECT_WIDTH
from kbase.render.columns import Column
from kbase.units import ABSENT, column_unit, fmt_delta_pct, fmt_ns

if TYPE_CHECKING:
    from kbase.comparison.changepoints import KernelStep
    from kbase.comparison.result import KernelHistory

HISTORY_SCHEMA = "kbase.history/1"
SPARKS = "▁▂▃▄▅▆▇█"
SETUP_MARK = "new setup"  # the Δ vs prev cell of a baseline whose GPU or window differs from the previous one's

COLUMNS = [
    Column("id", "id", 0),
    Column("commit", "commit", 0, justify="left"),
    Column("date", "date", 3, justify="left"),
    Column("workload", "workload", 0, min_width=8, want_width=16, max_width=32, justify="left", shrink=True),
    Column("subject", "subject", 1, min_width=12, want_width=28, max_width=SUBJECT_WIDTH, justify="left", shrink=True),
    Column("branch", "branch", 3, min_width=8, max_width=24, justify="left", shrink=True),
    Column("created", "created (UTC)", 4, justify="left"),
    Column("count", "launches", 2),
    Column("avg", "avg", 2),
    Column("per_iter", "per iter/GPU", 0),
    Column("change", "Δ vs prev", 0),
]


def with_changes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` plus ``change_pct``: per-iteration time against the previous baseline of the same
    workload (percent; None for a workload's first baseline or a missing value), and ``setup_change``: where
    that baseline has another setup (``comparison.setups``: GPU model/count, window), what changed — no change
    is measured across it (None elsewhere)."""
    return [{**r, "change_pct": change, "setup_change": setup} for r, (change, setup) in zip(rows, _changes(rows))]


def _changes(rows: list[dict[str, Any]]) -> list[tuple[float | None, str | None]]:
    """(change_pct, setup_change) of each row, as ``with_changes`` adds them (each row's setup key taken once:
    ``comparison.setups.setup_key``'s, for a row)."""
    from kbase.comparison.setups import describe

    prev: dict[str, tuple[dict[str, Any], tuple[str, bool]]] = {}
    out: list[tuple[float | None, str | None]] = []
    for r in rows:
        key = (str(r.get("fingerprint") or ""), bool(r.get("aligned")))
        last, last_key = prev.get(r["workload"], (None, None))
        before, now = None if last is None else last.get("per_iter_ns"), r["per_iter_ns"]
        moved = last is not None and "fingerprint" in r and last_key != key
        change = (now - before) / before * 100.0 if before and now is not None and not moved else None
        out.append((change, f"{describe(last)} -> {describe(r)}" if moved and last is not None else None))
        prev[r["workload"]] = (r, key)
    return out


def setup_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The history's setup changes (``with_changes``' rows), one line: where and what changed."""
    from kbase.render.safe import inert

    changed = [r for r in rows if r.get("setup_change")]
    if not changed:
        return []
    shown = "; ".join(f"@{r['id']}: {r['setup_change']}" for r in changed[:3])
    more = f"; and {len(changed) - 3} more" if len(changed) > 3 else ""
    return [inert(f"setup changed ({SETUP_MARK} in Δ vs prev) at {shown}{more}: no change is measured across it "
                  "(kbase steps finds steps within each setup; kbase snapshot --gpu-model records the GPU of a "
                  "capture that does not name it)")]


def sparkline(values: list[float]) -> str:
    """One character per value, ▁ (lowest) to █ (highest); a space for a missing value. The scale
    spans at least 10% of the highest value, so noise of a fraction of a percent stays flat."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    if not finite:
        return ""
    lo, hi = min(finite), max(finite)
    span = max(hi - lo, 0.1 * abs(hi))
    lo = (hi + lo) / 2 - span / 2  # a narrow band sits in the middle of the scale
    out = []
    for v in values:
        if v is None or not math.isfinite(v):
            out.append(" ")
        else:
            out.append(SPARKS[0 if span <= 0 else min(int((v - lo) / span * (len(SPARKS) - 1) + 0.5), len(SPARKS) - 1)])
    return "".join(out)


def spark_lines(rows: list[dict[str, Any]], width: int = 60) -> list[str]:
    """A sparkline of per-iteration time per workload (the newest ``width`` baselines)."""
    by_workload: dict[str, list[float]] = {}
    for r in rows:
        v = r["per_iter_ns"]
        by_workload.setdefault(r["workload"], []).append(float(v) if v is not None else math.nan)
    from kbase.render.safe import inert

    lines = []
    for workload, all_vals in by_workload.items():
        vals = all_vals[-width:]
        finite = [v for v in vals if math.isfinite(v)]
        rng = f"{fmt_ns(min(finite))} .. {fmt_ns(max(finite))}" if finite else "no per-iteration values"
        lines.append(f"{inert(str(workload))}: {sparkline(vals)}  ({len(all_vals)} baseline(s), per iter/GPU {rng})")
    return lines


def table_cells(rows: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The screen rows; each time column in one unit (``units.column_unit``)."""
    avg = column_unit(r["avg_ns"] for r in rows)
    per_iter = column_unit(r["per_iter_ns"] for r in rows)
    out = []
    for r in rows:
        date = r.get("commit_date")
        out.append({
            "id": f"@{r['id']}", "commit": str(r["commit"])[:12], "workload": str(r["workload"]),
            "date": date.strftime("%Y-%m-%d") if date is not None and hasattr(date, "strftime")
            else str(date or ABSENT)[:10],
            "subject": r.get("subject") or "",
            "branch": r.get("branch") or "(detached)", "created": str(r["created_at"])[:16],
            "count": f"{r['count']:,}", "avg": avg(r["avg_ns"]), "per_iter": per_iter(r["per_iter_ns"]),
            "change": SETUP_MARK if r.get("setup_change") else fmt_delta_pct(r["change_pct"]),
        })
    return out


def print_history(h: KernelHistory, console: Any, wide: bool = False, quiet: bool = False,
                  limit: int | None = None) -> list[dict[str, Any]]:
    """Heading, sparklines (every baseline) and the table (the newest ``limit`` rows; None: all); returns
    the rows with their changes (for a caller's sections)."""
    from kbase.render.layout import print_table  # rich: only for the screen (JSON and CSV never load it)
    from kbase.render.safe import inert

    rows = with_changes(h.rows)
    label = inert(f"{h.short_name} {short_id(h.name)}")
    if quiet:
        last = rows[-1] if rows else None
        tail = "" if last is None else f"; newest @{last['id']}: {fmt_ns(last['per_iter_ns'])} per iter/GPU " \
            f"({fmt_delta_pct(last['change_pct'])})"
        console.print(f"{label}: {len(rows)} baseline(s){tail}", highlight=False, markup=False, soft_wrap=True)
        return rows
    console.print(f"kernel: {label}", highlight=False, markup=False, overflow="ellipsis", no_wrap=True)
    if h.name != h.short_name:
        console.print(f"full name: {inert(h.name)}", highlight=False, markup=False, style="dim", overflow="ellipsis",
                      no_wrap=True)
    for line in spark_lines(rows):
        console.print(line, highlight=False, markup=False)
    shown = rows[-limit:] if limit and len(rows) > limit else rows
    title = (f"{len(rows)} baseline(s) with this kernel (oldest first)" if len(shown) == len(rows) else
             f"the newest {len(shown)} of {len(rows):,} baselines with this kernel (oldest first; -n 0: all)")
    print_table(console, COLUMNS, table_cells(shown), wide=wide, title=title)
    for line in setup_lines(rows):
        console.print(line, highlight=False, markup=False, style="yellow")
    return rows


def history_doc(h: KernelHistory, workload: str | None = None, branch: str | None = None,
                steps: list[KernelStep] | None = None, limit: int | None = None) -> dict[str, Any]:
    """``steps``: the kernel's detected steps and creeps (None: not computed, its baselines span several
    workloads or branches; ``steps_note`` says so). ``limit``: only the newest baselines."""
    from kbase.render.steps import step_dict

    recs = _public_rows(h.rows, limit)
    found = None if steps is None else [{k: _finite(v) for k, v in step_dict(s).items()} for s in steps]
    doc = {"schema": HISTORY_SCHEMA, "query": h.query,
           "kernel": {"name": h.name, "short_name": h.short_name, "id": short_id(h.name)},
           "filters": {"workload": workload, "branch": branch}, "baselines": recs, "steps": found}
    if steps is None:
        doc["steps_note"] = "not computed: the baselines span several workloads or branches (pass --name and --branch)"
    return doc


def _public_rows(rows: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """The newest ``limit`` rows of ``with_changes`` as JSON and CSV give them: the setup as GPU model/count and
    alignment (its fingerprint and window key are the store's), dates in ISO 8601; one dict made a row
    (thousands of rows: no intermediate copies)."""
    changes = _changes(rows)
    start = len(rows) - limit if limit and len(rows) > limit else 0
    out: list[dict[str, Any]] = []
    append = out.append
    for r, (change, setup) in zip(rows[start:], changes[start:]):
        d = r.copy()
        pop = d.pop
        pop("fingerprint", None)  # (``_PRIVATE``, spelt out: 10,000 rows)
        pop("window_spec", None)
        d["change_pct"], d["setup_change"] = change, setup
        created: Any = d.get("created_at")
        committed: Any = d.get("commit_date")
        if hasattr(created, "isoformat"):
            d["created_at"] = created.isoformat()
        if hasattr(committed, "isoformat"):
            d["commit_date"] = committed.isoformat()
        append(d)
    return out


_PRIVATE = ("fingerprint", "window_spec")  # the store's setup keys


def _finite(v: Any) -> Any:
    return None if isinstance(v, float) and not math.isfinite(v) else v


def history_json(h: KernelHistory, workload: str | None = None, branch: str | None = None,
                 steps: list[KernelStep] | None = None, limit: int | None = None) -> str:
    """Strict JSON, one baseline per line (``jsonable.dumps``: its records in one call of the C encoder)."""
    return jsonable.dumps(history_doc(h, workload, branch, steps, limit))


def step_marks(rows: list[dict[str, Any]], steps: list[KernelStep] | None) -> list[str]:
    """Per row, the steps that land on it: a step at the first baseline of its new level, a creep at
    the first baseline of its first and of its last new level."""
    from kbase.render.steps import step_label

    marks: list[list[str]] = [[] for _ in rows]
    first_at: dict[str, int] = {}
    for i, r in enumerate(rows):
        first_at.setdefault(str(r["commit"]), i)
    for s in steps or []:
        if s.kind == "creep" and s.first_commit != s.to_commit and s.first_commit in first_at:
            marks[first_at[s.first_commit]].append(f"creep begins ({s.steps} steps to {s.to_commit[:10]})")
        if s.to_commit in first_at:
            marks[first_at[s.to_commit]].append(step_label(s))
    return ["; ".join(m) for m in marks]


def history_csv(h: KernelHistory, steps: list[KernelStep] | None = None, limit: int | None = None) -> str:
    """One row per baseline; the ``step`` column marks where detected steps and creeps land (empty when
    none, or when steps were not computed)."""
    import csv
    import io

    from kbase.render.safe import csv_text

    rows = _public_rows(h.rows, limit)
    marks = step_marks(rows, steps)
    rows = [{**r, "step": m} for r, m in zip(rows, marks)]
    buf = io.StringIO()
    has_cr = any(isinstance(v, str) and "\r" in v for r in rows for v in r.values())
    w = csv.writer(buf, lineterminator="\n", quoting=csv.QUOTE_ALL if has_cr else csv.QUOTE_MINIMAL)
    if rows:
        w.writerow(list(rows[0]))
        w.writerows(["" if v is None else csv_text(v) for v in r.values()] for r in rows)
    return buf.getvalue()
