"""The GPU time budget (``analysis.budget``) as text lines and as ``kbase.budget/1`` JSON."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from kbase.analysis.budget_blocks import BLOCK_LABELS, BLOCKS, FIELDS, GAP_CAUSE_TEXT, GAP_CAUSES, Blocks, Budget
from kbase.render.safe import inert
from kbase.units import column_unit, fmt_ns, fmt_pct

if TYPE_CHECKING:
    from kbase.comparison.step import step_verdict_lines  # noqa: F401 - re-exported: the renderers' one line


def __getattr__(name: str) -> Any:
    """``step_verdict_lines``, re-exported on first use: the comparison (numpy) stays unloaded while a
    leaderboard's budget lines render (``kbase top`` from the cache)."""
    if name == "step_verdict_lines":
        from kbase.comparison.step import step_verdict_lines

        return step_verdict_lines
    raise AttributeError(f"module 'kbase.render.budget' has no attribute {name!r}")


SCHEMA = "kbase.budget/1"


def _unit(b: Budget) -> str:
    return "per iteration per GPU" if b.unit == "iteration" else "per window per GPU"


def blocks_line(b: Budget) -> str:
    """The four blocks, adding up to 100% of the window's GPU time."""
    parts = [f"{BLOCK_LABELS[k]} {fmt_pct(b.share(k))}" for k in BLOCKS]
    return " | ".join(parts) + " (= 100%)"


def budget_summary_lines(b: Budget) -> list[str]:
    """The short form ``kbase top`` shows: the blocks, what ran hidden, the step."""
    t = b.total
    lines = [blocks_line(b)]
    hidden = []
    if t.communication_overlapped_ns:
        hidden.append(f"communication {fmt_ns(b.per_unit(t.communication_overlapped_ns))}")
    if t.memory_overlapped_ns:
        hidden.append(f"memory {fmt_ns(b.per_unit(t.memory_overlapped_ns))}")
    if hidden:
        lines.append(f"hidden under a higher block ({_unit(b)}): " + ", ".join(hidden))
    step = step_line(b)
    if step:
        lines.append(step)
    return lines


def step_line(b: Budget) -> str:
    if b.unit != "iteration":
        return "step time: no iteration markers, so no step to judge (the busy share is judged instead)"
    samples = b.step_samples()
    if not samples:
        return ""
    mean = sum(samples) / len(samples)
    src = "host marker range" if b.step_source == "host" else "GPU window: no host range"
    gpu = fmt_ns(b.per_unit(b.total.window_ns))
    return f"step: {fmt_ns(mean)} per iteration ({src}); GPU window {gpu} per iteration per GPU"


def budget_lines(b: Budget) -> list[str]:
    """``kbase budget``'s full text."""
    t = b.total
    lines = [f"window: {b.window}", f"share denominator: {b.denominator}", *budget_summary_lines(b), ""]
    lines.append(f"GPU time {_unit(b)}:")
    for k in FIELDS:
        lines.append(f"  {k.removesuffix('_ns').replace('_', ' '):<28} {fmt_ns(b.per_unit(getattr(t, k))):>12}")
    lines += ["", _gaps_header(b)]
    for cause in GAP_CAUSES:
        got = b.gaps.get("by_cause", {}).get(cause, {"count": 0, "ns": 0})
        if got["count"]:
            lines.append(f"  {cause:<8} {fmt_ns(b.per_unit(got['ns'])):>12}  {got['count']:>8,} gap(s)  "
                         f"{GAP_CAUSE_TEXT[cause]}")
    sizes = [(label, v) for label, v in b.gaps.get("by_size", {}).items() if v["count"]]
    if sizes:
        lines.append("  by size: " + ", ".join(f"{label} {v['count']:,} ({fmt_ns(b.per_unit(v['ns']))})"
                                                for label, v in sizes))
    if b.largest_gaps:
        lines.append("largest idle gaps:")
        for gap in b.largest_gaps:
            it = f"iteration {gap.iteration}, " if gap.iteration is not None else ""
            before = inert(gap.before) + (f" ({inert(gap.before_range)})" if gap.before_range else "")
            after = inert(gap.after) + (f" ({inert(gap.after_range)})" if gap.after_range else "")
            lines.append(f"  {fmt_ns(gap.duration_ns):>10}  GPU {gap.gpu}, {it}after {before or 'window start'}, "
                         f"before {after or 'window end'}: {gap.cause}")
    if len(b.gpus) > 1:
        lines += ["", "per GPU (window, blocks of its window, time waiting in collectives beyond the fastest rank):"]
        for g in b.gpus:
            gb = g.blocks
            share = " ".join(f"{BLOCK_LABELS[k].split()[-1]} "
                             f"{fmt_pct(getattr(gb, k) / gb.window_ns if gb.window_ns else None)}" for k in BLOCKS)
            lines.append(f"  {inert(g.label)}: {fmt_ns(gb.window_ns)}  {share}  collective wait "
                         f"{fmt_ns(g.collective_wait_ns)}")
        s = b.straggler
        if s is not None:
            fastest = min(b.gpus, key=lambda g: g.blocks.window_ns)
            extra = s.blocks.window_ns - fastest.blocks.window_ns
            lines.append(f"straggler: {inert(s.label)} (longest window, {fmt_ns(extra)} more than the shortest)")
    return lines


def _gaps_header(b: Budget) -> str:
    return f"idle gaps by likely cause ({_unit(b)}):"


def _row(x: Blocks) -> dict[str, Any]:
    return x.as_dict()


def budget_doc(b: Budget, source: dict[str, Any] | None = None) -> dict[str, Any]:
    """``kbase.budget/1``: the per-GPU rows (with their iterations when computed from a profile; a stored
    budget keeps per-iteration sums over GPUs only: top-level ``iterations``), the total and the gaps."""
    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "unit": b.unit,
        "window": b.window,
        "denominator": b.denominator,
        "n_iterations": b.n_iterations,
        "gpus": [{"gpu": g.gpu, "rank": g.rank, "label": g.label, **_row(g.blocks),
                  "collective_wait_ns": g.collective_wait_ns,
                  "iterations": [{"iteration": k, **_row(x)} for k, x in g.iterations]} for g in b.gpus],
        "total": _row(b.total),
        "shares": {k.removesuffix("_ns"): b.share(k) for k in BLOCKS},
        "iterations": [{"iteration": k, **_row(x)} for k, x in b.iterations],
        "step": {"source": b.step_source, "per_iteration_ns": b.step_samples()},
        "idle_gaps": b.gaps,
        "largest_gaps": [vars(g) for g in b.largest_gaps],
        "straggler": b.straggler.gpu if b.straggler is not None else None,
    }
    if source:
        doc["source"] = source
    return doc


def budget_json(b: Budget, source: dict[str, Any] | None = None) -> str:
    return json.dumps(budget_doc(b, source), allow_nan=False, ensure_ascii=False)


def budget_html(b: Budget, source: dict[str, Any] | None = None) -> str:
    """A notebook's table of the budget (``BudgetResult._repr_html_``): the four blocks per unit per GPU and their
    shares (adding up to 100% of the window), what ran hidden beside them, the step; every text escaped."""
    from kbase.display import html_table

    t = b.total
    unit = column_unit(b.per_unit(getattr(t, k)) for k in (*BLOCKS, "window_ns"))
    rows = [(BLOCK_LABELS[k], unit(b.per_unit(getattr(t, k))), fmt_pct(b.share(k))) for k in BLOCKS]
    rows.append(("GPU window", unit(b.per_unit(t.window_ns)), "100%"))
    for k, label in (("communication_overlapped_ns", "communication hidden under compute"),
                     ("memory_overlapped_ns", "memory hidden under a higher block")):
        if getattr(t, k):
            rows.append((f"{label} (not in the 100%)", unit(b.per_unit(getattr(t, k))), "-"))
    src = source or {}
    what = (f"baseline @{src['baseline']} ({str(src.get('commit') or '')[:12]})" if src.get("baseline") is not None
            else str(src.get("file") or ""))
    caption = (f"GPU time budget {_unit(b)}" + (f" of {what}" if what else "")
               + f": {len(b.gpus)} GPU(s), {b.n_iterations} {b.unit}(s)")
    notes = [n for n in (step_line(b), f"window: {b.window}", f"share denominator: {b.denominator}") if n]
    return html_table(["block", _unit(b), "share"], rows, caption=caption, notes=notes, numeric=(1, 2))
