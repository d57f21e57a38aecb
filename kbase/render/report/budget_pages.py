"""The GPU time budget's sections of the report pages (docs/budget.md): the trend's bar per commit, the
leaderboard's bar per iteration, the diff's step verdict and its change block by block. Each returns its HTML
(text escaped with ``safe.html_text``) and its figures; every number and verdict is the one the api computed
(the stored budgets, the diff's ``budget`` object), formatted here and nowhere recomputed."""

from __future__ import annotations

import math
from typing import Any

from kbase.comparison.step import step_verdict_lines
from kbase.render.report import budget_figures as bfig
from kbase.render.report.model import BudgetView, ReportData
from kbase.render.report.safe import html_text
from kbase.units import column_unit

HIDDEN = (("communication_overlapped_ns", "communication hidden under compute"),
          ("memory_overlapped_ns", "memory hidden under a higher block"))


def _table(head: list[str], rows: list[str], cls: str) -> str:
    heads = "".join(f"<th>{h}</th>" for h in head)
    return (f'<div class="table-wrap"><table class="{cls}"><thead><tr>{heads}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _notes(notes: list[str]) -> str:
    return ('<ul class="notes">' + "".join(f"<li>{html_text(n)}</li>" for n in notes) + "</ul>") if notes else ""


def _share(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.1%}"


def trend_section(data: ReportData, max_points: int) -> tuple[str, dict]:
    """The trend page's budget: a bar per commit (per iteration per GPU) and the step time; the commits without a
    stored budget draw none and the note says how many."""
    head = ("<h2>GPU time budget per iteration per GPU, and the step time</h2><p class='sub'>Each bar is the GPU "
            "window of one iteration: compute, exposed communication, exposed memory and idle add up to it "
            "(docs/budget.md); the line is the step time, the verdict a diff judges.</p>")
    notes = _notes(data.budget_notes)
    if all(p.budget is None for p in data.commits):
        return head + notes, {}
    return (head + notes + '<div class="chart" id="fig-budget-trend"></div>',
            {"fig-budget-trend": bfig.budget_trend_figure(data, max_points=max_points)})


def leaderboard_section(view: BudgetView | None) -> tuple[str, dict]:
    """The leaderboard page's budget: the four blocks of the window (adding up to 100%), what ran hidden, the
    step, and a bar per iteration."""
    head = "<h2>GPU time budget (each GPU's window: the four blocks add up to 100%)</h2>"
    if view is None:
        return (head + "<p class='sub'>this baseline stores no GPU time budget (stored before kbase kept it): "
                "snapshot its capture again to have one</p>"), {}
    t = view.total
    per = "per iteration per GPU" if view.unit == "iteration" else "per GPU-second of window"
    blocks = [(name, getattr(t, f)) for f, _, name, _ in bfig.BLOCKS]
    unit = column_unit([v for _, v in blocks] + [t.window_ns, view.communication_overlapped_ns,
                                                  view.memory_overlapped_ns, t.step_ns])
    rows = [f"<tr><td>{html_text(name)}</td><td class='num'>{unit(v)}</td>"
            f"<td class='num'>{_share(v / t.window_ns if t.window_ns else None)}</td></tr>" for name, v in blocks]
    rows.append(f"<tr class='total'><td>GPU window</td><td class='num'>{unit(t.window_ns)}</td>"
                "<td class='num'>100.0%</td></tr>")
    for f, name in HIDDEN:
        v = getattr(view, f)
        if v:
            rows.append(f"<tr class='hidden-block'><td>{html_text(name)} (not in the 100%)</td>"
                        f"<td class='num'>{unit(v)}</td><td class='num'>-</td></tr>")
    if t.step_ns is not None:
        src = "host step range" if view.step_source == "host" else "GPU window"
        rows.append(f"<tr class='step'><td>step time ({src})</td><td class='num'>{unit(t.step_ns)}</td>"
                    "<td class='num'>-</td></tr>")
    body = (head + f"<p class='sub'>{html_text(per)}; {view.gpus} GPU(s); {len(view.iterations)} iteration(s). "
            "Precedence compute &gt; communication &gt; memory &gt; idle: communication or copies hidden under "
            "compute are not in the 100% (listed below it).</p>"
            + _table(["block", per, "share of window"], rows, "budget-blocks"))
    if not view.iterations:
        return body, {}
    return (body + "<h2>Per iteration (each bar 100% of that iteration's GPU window; line: step time)</h2>"
            '<div class="chart" id="fig-budget"></div>', {"fig-budget": bfig.budget_iterations_figure(view)})


def diff_section(doc: dict[str, Any]) -> tuple[str, dict]:
    """The diff page's step: its verdict line (as ``kbase diff`` prints it) and the budget's change block by block
    (the diff's ``budget`` object), beside the kernel table."""
    b = doc.get("budget")
    head = "<h2>The step: its verdict and the GPU time budget, block by block</h2>"
    if not b:
        return (head + "<p class='sub step-verdict none'>step not judged: a side has no GPU time budget (stored "
                "before kbase kept it)</p>"), {}
    s = b.get("step") or {}
    busy = b.get("busy_share") or {}
    state = ("regressed" if s.get("regressed") or busy.get("regressed") else "improved" if s.get("improved")
             else "judged" if s.get("judged") or busy.get("judged") else "not-judged")
    verdict = "".join(f"<p class='step-verdict {state}'>{html_text(line)}</p>" for line in step_verdict_lines(b))
    per = "per iteration per GPU" if b["unit"] == "iteration" else "per window per GPU"
    keys = [(key, name) for _, key, name, _ in bfig.BLOCKS] + [("window_ns", "GPU window")]
    unit = column_unit(v for key, _ in keys for v in (b["before"][key], b["after"][key]))
    delta = column_unit((b["delta_ns"][key] for key, _ in keys), signed=True)
    before_w = b["before"]["window_ns"]
    rows = []
    for key, name in keys:
        d = b["delta_ns"][key]
        rows.append(f"<tr{' class=total' if key == 'window_ns' else ''}><td>{html_text(name)}</td>"
                    f"<td class='num'>{unit(b['before'][key])}</td><td class='num'>{unit(b['after'][key])}</td>"
                    f"<td class='num'>{delta(d)}</td>"
                    f"<td class='num'>{_share(d / before_w if before_w else None)}</td></tr>")
    extra = [f"what grew: {b['explained']}"] + ([b["amdahl"]] if b.get("amdahl") else []) + list(b.get("notes", []))
    body = (head + verdict + _table(["block", "before", "after", "Δ", "Δ of the window before"], rows,
                                    "budget-diff")
            + f"<p class='sub'>{html_text(per)}; the blocks' Δ add up to the window's Δ.</p>" + _notes(extra)
            + '<div class="chart" id="fig-budget-diff"></div>')
    return body, {"fig-budget-diff": bfig.budget_diff_figure(b)}


def step_banner_parts(doc: dict[str, Any]) -> dict[str, str]:
    """The gate's step findings (failing or accepted) by name, each with the gate's reason text (``verdict.reasons``
    follows ``verdict.failing``): the banner shows them like any other failure."""
    from kbase.comparison.gate import BUSY_SHARE, STEP_TIME

    v = doc.get("verdict") or {}
    failing, reasons = v.get("failing", []), v.get("reasons", [])
    aligned = len(reasons) == len(failing)
    return {n: (reasons[i] if aligned else n) for i, n in enumerate(failing) if n in (STEP_TIME, BUSY_SHARE)}
