"""The pull-request comment of ``kbase gate --comment-md FILE``: short, sticky, and safe to post.

Shape (everything above ``<details>`` is what a reviewer sees without clicking; the demo's regression
takes about 25 lines)::

    <!-- kbase-gate -->                      hidden marker: CI finds and updates this one comment
    ### ❌ kbase gate: FAIL — ...            verdict, workload, commits
    | totals table |                         kernel / compute / communication / memory / wall
    **Why** - reasons, warnings, accepted
    | the few kernels that matter |          by |effect on the iteration|, at most ``top``
    <details> full table of changed kernels </details>

GitHub rejects a comment over 65,536 characters: the full table is cut (rows from the end) to fit
``max_chars`` and says how many rows were left out. Kernel names and every other string from a
profile are escaped for GitHub Markdown (``md_text``): no table break, code span, emphasis, link,
HTML tag, comment, mention or line break can come out of a name.
"""

from __future__ import annotations

import math

from kbase.analysis.names import display_names
from kbase.comparison.result import row_delta_pct, row_sides
from kbase.comparison.side import Unit, unit_of, unit_why
from kbase.enums import KernelClass, class_counts
from kbase.render.diff_table import EXPLAINED, SHOWN_BY_DEFAULT
from kbase.render.safe import md_text
from kbase.units import ABSENT, ColumnUnit, column_unit, fmt_delta_pct, fmt_money, fmt_p, group_units

MARKER = "<!-- kbase-gate -->"
GITHUB_COMMENT_LIMIT = 65_536
DEFAULT_MAX_CHARS = 60_000  # headroom under GitHub's limit for what CI appends (links, run id)
HEAD = {"pass": ("✅", "PASS"), "fail": ("❌", "FAIL"), "incomparable": ("⚠️", "INCOMPARABLE"),
        "warn-only": ("⚠️", "FAIL (warn-only, exit 0)")}
TC = {"tc": "✓", "fallback": "⚠", "na": "-"}


def _num(x) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _pct(x, digits: int = 1) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        return ABSENT
    return f"{x:+.{digits}f}%"


def _effect(x) -> str:
    return ABSENT if not isinstance(x, (int, float)) or not math.isfinite(x) else f"{x:+.2%}"


def _changed(doc: dict, verdict: dict | None) -> list[dict]:
    """The kernels the tables list (the diff's default view: swapped ones included), regressions first."""
    if _unjudged(verdict):
        return []  # an incomparable gate judged no kernel: no row says otherwise
    rows = [r for r in doc.get("kernels", []) if r["class"] in SHOWN_BY_DEFAULT]
    return sorted(rows, key=lambda r: (r["class"] != "regressed", r["class"] != "regressed_below_floor",
                                       -abs(r["effect"] or 0.0)))


def _unjudged(verdict: dict | None) -> bool:
    return verdict is not None and verdict.get("status") == "incomparable"


def _mde(r: dict) -> str:
    """The kernel's minimum detectable effect (80% power, between-process noise included): absent when untested."""
    m = r.get("mde_rel")
    return f"{m:.1%}" if isinstance(m, (int, float)) and not isinstance(m, bool) and math.isfinite(m) else ABSENT


def _class(r: dict) -> str:
    return KernelClass(r["class"]).label if r["class"] in KernelClass._value2member_map_ else str(r["class"])


def _headline(doc: dict, verdict: dict | None) -> str:
    if verdict is None:
        icon, word = "ℹ️", "diff"
    else:
        icon, word = HEAD.get(verdict.get("status", ""), ("ℹ️", md_text(verdict.get("status", "?"))))
    tail = f" (exit {int(verdict['code'])})" if verdict is not None and "code" in verdict else ""
    if _unjudged(verdict):
        return f"### {icon} kbase gate: {word}{tail} — the sides are not comparable"
    bits = class_counts(doc.get("counts", {}), only=SHOWN_BY_DEFAULT)
    return f"### {icon} kbase gate: {word}{tail}" + (f" — {bits}" if bits else " — no kernel changed")


def _meta(doc: dict) -> str:
    b, a = doc.get("before", {}), doc.get("after", {})
    units = a.get("units")
    units_text = f"{units:g} {md_text(a.get('unit', 'iteration'))}s" if isinstance(units, (int, float)) else ""
    return (f"workload **{md_text(a.get('workload') or '-')}** · `{md_text((b.get('commit') or '?')[:12])}` → "
            f"`{md_text((a.get('commit') or '?')[:12])}` · {a.get('gpus', '?')} GPU(s) "
            f"{md_text(a.get('gpu_models') or '')}"
            + (f" · {units_text}" if units_text else ""))


def _totals(doc: dict) -> list[str]:
    """Kernel, compute, communication, memory and wall time, before and after in one unit; a category absent on
    both sides (no NCCL on one GPU) is left out."""
    from kbase.render.diff import cost_line, present

    out = [f"| {unit_of(doc.get('unit')).per} per GPU | before | after | Δ |", "|---|---:|---:|---:|"]
    rows = [(label, t) for key, label in (("kernel", "**kernel time**"), ("compute", "compute"),
                                          ("communication", "communication"), ("memory", "memory"),
                                          ("iteration_wall", "GPU wall"), ("step_wall", "CPU step wall"))
            if present(t := doc.get("totals", {}).get(key))]
    unit = column_unit(_num(v) for _, t in rows for v in (t["before"], t["after"]))
    out += [f"| {label} | {unit(_num(t['before']))} | {unit(_num(t['after']))} | {fmt_delta_pct(t.get('delta_pct'))} |"
            for label, t in rows]
    if "cost" in doc:
        out += ["", f"**{md_text(cost_line(doc['cost']))}**"]
    return out


def _why(doc: dict, verdict: dict | None, limit: int = 6) -> list[str]:
    from kbase.render.incomparable import incomparable_hint

    hint = incomparable_hint(doc.get("mismatches", []))
    items = ([f"INCOMPARABLE: {m}" for m in doc.get("mismatches", [])] + ([f"to compare: {hint}"] if hint else [])
             if verdict is None else [])
    if verdict is not None:
        items += list(verdict.get("reasons", []))
        items += [f"warning: {w}" for w in verdict.get("warnings", [])]
        items += [f"accepted: {a.get('name', '')} — {a.get('reason', '')} (expires {a.get('expires') or 'never'})"
                  for a in verdict.get("accepted", [])]
    if not items:
        return []
    out = [f"- {md_text(i, 300)}" for i in items[:limit]]
    if len(items) > limit:
        out.append(f"- … and {len(items) - limit} more (see the full table)")
    return out


def _row(r: dict, full: bool, units: tuple[ColumnUnit, ColumnUnit], label: str | None = None,
         currency: str | None = None) -> str:
    """One changed kernel; ``units``: the table's (before/after, Δ) column units; ``currency``: its cost column."""
    times, delta = units
    cls = _class(r) + (" (ignored)" if r.get("ignored") else "")
    tc = TC.get(r.get("tc_after") or r.get("tc_before") or "na", "-")
    cells = [f"**{cls}**" if r["class"] == "regressed" and r.get("gated") else cls,
             md_text(label or r["short_name"], 70), tc, delta(_num(r.get("delta_ns"))), row_delta_pct(r),
             _effect(r.get("effect")), _mde(r)]
    if currency is not None:
        cells.append(fmt_money(r.get("cost_per_month"), currency) if not r.get("swap") else ABSENT)
    if full:
        p = r.get("p_value")
        before, after = row_sides(r)
        cells = cells[:3] + [times(_num(before)), times(_num(after))] + cells[3:] + [
            f"{(r.get('count_before') or 0):.1f}→{(r.get('count_after') or 0):.1f}", _pct(r.get("delta_avg_pct")),
            fmt_p(p) if isinstance(p, (int, float)) and not isinstance(p, bool) else ABSENT,
            md_text(r.get("diagnosis") or "", 120), md_text(r.get("amdahl") or "", 160)]
    else:
        cells.append(md_text(r.get("diagnosis") or "", 80))
    return "| " + " | ".join(cells) + " |"


TOP_HEAD = ["| | kernel | TC | Δ/iter | Δ% | effect on iter | MDE | diagnosis |",
            "|---|---|:-:|---:|---:|---:|---:|---|"]
FULL_HEAD = [("| class | kernel | TC | before | after | Δ/iter | Δ% | effect | MDE | launches/iter | Δ/launch | p "
             "| diagnosis | Amdahl |"), "|---|---|:-:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]


def _heads(cost: bool, unit: Unit = Unit.ITERATION) -> tuple[list[str], list[str]]:
    """The two tables' heads in the comparison's unit, with a cost column after the effect when the fleet is
    priced."""
    top, full = list(TOP_HEAD), list(FULL_HEAD)
    if cost:
        top = [TOP_HEAD[0].replace("| MDE |", "| MDE | cost/month |"), TOP_HEAD[1] + "---:|"]
        full = [FULL_HEAD[0].replace("| MDE |", "| MDE | cost/month |"), FULL_HEAD[1] + "---:|"]
    word = {Unit.ITERATION: "iter", Unit.RUN: "run", Unit.WINDOW_SECOND: "window-s"}[unit]
    return ([top[0].replace("/iter", unit.short).replace("on iter", f"on {word}"), top[1]],
            [full[0].replace("/iter", unit.short), full[1]])


def comment_markdown(diff_doc: dict, verdict: dict | None = None, *, top: int = 5, report_url: str | None = None,
                     max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """The PR comment for a ``kbase.diff/4`` document and its gate verdict (``Verdict.as_dict()``;
    default: ``diff_doc["verdict"]``). Starts with ``MARKER``; never longer than ``max_chars``."""
    verdict = verdict if verdict is not None else diff_doc.get("verdict")
    changed = _changed(diff_doc, verdict)
    # two changed kernels with one short name (say two elementwise template instances) are told apart as
    # the terminal table tells them: template arguments and a short id
    labels = display_names([r["name"] for r in changed], [r["short_name"] for r in changed])
    lines = [MARKER, _headline(diff_doc, verdict), "", _meta(diff_doc), "", *_totals(diff_doc)]
    currency = diff_doc["cost"]["currency"] if "cost" in diff_doc else None
    unit = unit_of(diff_doc.get("unit"))
    top_head, full_head = _heads(currency is not None, unit)
    shown_units = _units(changed[:top])
    why = _why(diff_doc, verdict)
    if why:
        lines += ["", "**Why**", *why]
    if changed:
        lines += ["", (f"**Kernels that matter** (top {min(top, len(changed))} of {len(changed)} changed, "
                      f"by effect on {unit.whole})"), *top_head,
                  *(_row(r, False, shown_units, lb, currency) for r, lb in zip(changed[:top], labels))]
    notes = diff_doc.get("notes", [])
    # the noise the verdict rests on, always
    notes = notes[:3] + [n for n in notes[3:] if n.startswith(("noise: ", "between-process noise: "))]
    if notes:
        lines += ["", *(f"> {md_text(n, 300)}" for n in notes)]
    chosen = md_text(unit_why(unit, diff_doc.get("unit_reason")), 200)
    tail = ["", f"<sub>kbase · {md_text(diff_doc.get('schema', 'kbase.diff/4'))} · times are {unit.per} per GPU"
                f"{chosen}"
                " · MDE: the smallest change its test detects (80% power)" + md_text(_legend(changed))
                + (f" · [full report]({md_text(report_url)})" if report_url else "") + "</sub>"]
    all_units = _units(changed)
    full = [_row(r, True, all_units, lb, currency) for r, lb in zip(changed, labels)]
    head = "\n".join(lines)
    for shown in _fits(head, full, tail, max_chars):
        details = ["", f"<details><summary>All {len(changed)} changed kernels</summary>", "", *full_head,
                   *full[:shown]]
        if shown < len(full):
            details += ["", (f"_{len(full) - shown} more row(s) left out to stay under GitHub's comment limit; "
                            "the JSON report (`--output`) has them all._")]
        details += ["", "</details>"]
        text = "\n".join([head, *(details if changed else []), *tail]) + "\n"
        if len(text) <= max_chars:
            return text
    # pathological: the head alone is too long
    return head[: max_chars - 200] + "\n\n_(comment cut to fit GitHub's limit)_\n"


def _units(rows: list[dict]) -> tuple[ColumnUnit, ColumnUnit]:
    """The (before/after, Δ) units of a table of ``rows``: one unit for both (``units.group_units``)."""
    return group_units((_num(v) for r in rows for v in row_sides(r)), (_num(r.get("delta_ns")) for r in rows))


def _legend(rows: list[dict]) -> str:
    """`` · swapped: …``: what the less obvious class words of the table mean (``KernelClass.meaning``)."""
    used = {r["class"] for r in rows}
    return "".join(f" · {c.label}: {c.meaning}" for c in EXPLAINED if c.value in used)


def _fits(head: str, rows: list[str], tail: list[str], max_chars: int):
    """Row counts to try, largest first: all rows if they fit, else the largest count that fits
    (found by bisection on the text length), then zero."""
    fixed = len(head) + sum(len(t) + 1 for t in tail) + 400  # details scaffolding and the cut note
    budget = max_chars - fixed
    sizes = [len(r) + 1 for r in rows]
    total, n = 0, 0
    for s in sizes:
        if total + s > budget:
            break
        total += s
        n += 1
    yield n
    if n:
        yield 0


def no_baseline_markdown(workload: str, commit: str, reason: str) -> str:
    """The sticky comment when there is nothing to compare with (first run, fork PR without the
    store): stored and passed, with the notice."""
    return (f"{MARKER}\n### ℹ️ kbase gate: PASS (no baseline to compare with)\n\n"
            f"workload **{md_text(workload)}** · `{md_text(commit[:12])}`\n\n> {md_text(reason, 400)}\n\n"
            "The gate passes with this notice (`--if-no-baseline pass`); once the base branch has a baseline, "
            "this comment shows the kernel diff.\n")
