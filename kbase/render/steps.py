"""Render detected steps and creeps (``comparison.changepoints.KernelStep``): the ``kbase steps`` table
and JSON (schema ``kbase.steps/1``), and the steps section of ``kbase history`` (table, JSON, CSV).

Kernel names and workloads are data: every cell goes through ``layout.print_table`` (inert text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbase.render.columns import Column
from kbase.units import fmt_ns

if TYPE_CHECKING:
    from kbase.comparison.changepoints import KernelStep
    from kbase.comparison.history import StepsReport

COLUMNS = [
    Column("kind", "kind", 0, justify="left"),
    Column("kernel", "kernel", 0, min_width=12, want_width=40, max_width=80, justify="left", shrink=True),
    Column("commits", "commits", 0, justify="left"),
    Column("before", "before/iter", 2),
    Column("after", "after/iter", 2),
    Column("change", "change", 0),
    Column("effect", "effect on iter", 1),
]


def step_dict(s: KernelStep) -> dict[str, Any]:
    return {"name": s.name, "short_name": s.short_name, "kind": s.kind, "from_commit": s.from_commit,
            "first_commit": s.first_commit, "to_commit": s.to_commit, "before_ns": s.before_ns, "after_ns": s.after_ns,
            "rel": s.rel, "effect": s.effect, "steps": s.steps, "z": s.z}


def steps_doc(report: StepsReport) -> dict[str, Any]:
    from kbase import jsonable
    from kbase.comparison.changepoints import STEPS_SCHEMA

    return jsonable.clean({"schema": STEPS_SCHEMA, "workload": report.workload, "baselines": report.baselines,
                           "commits": report.commits, "notes": report.notes,
                           "steps": [step_dict(s) for s in report.steps]})


def step_range(s: KernelStep) -> str:
    if s.kind == "creep":
        return f"{s.from_commit[:10]}..{s.to_commit[:10]} ({s.steps} steps)"
    return f"{s.from_commit[:10]}..{s.to_commit[:10]}"


def step_label(s: KernelStep) -> str:
    """One cell: what changed and by how much (a creep: its cumulative size and its steps)."""
    return f"{s.kind} {s.rel:+.1%}" + (f" ({s.steps} steps)" if s.kind == "creep" else "")


def _cells(s: KernelStep) -> dict[str, str]:
    return {"kind": s.kind, "kernel": s.short_name, "commits": step_range(s), "before": fmt_ns(s.before_ns),
            "after": fmt_ns(s.after_ns), "change": f"{s.rel:+.1%}",
            "effect": "-" if s.effect != s.effect else f"{s.effect:+.2%}"}


def print_steps(report: StepsReport, console: Any, wide: bool = False) -> None:
    from kbase.render.layout import inert, print_table

    for n in report.notes:
        console.print(f"note: {inert(n)}", highlight=False, markup=False)
    title = (f"{len(report.steps)} step(s) in {report.workload!r} over {report.baselines} baseline(s), "
             f"{len(report.commits)} commit(s)")
    print_table(console, COLUMNS, [_cells(s) for s in report.steps], wide=wide, title=title,
                row_styles=["red" if s.rel > 0 else "green" for s in report.steps])


def print_kernel_steps(steps: list[KernelStep] | None, console: Any) -> None:
    """The steps section under one kernel's history table (one line each)."""
    if steps is None:
        console.print("steps: not computed (the baselines span several workloads or branches; pass --name and "
                      "--branch)", highlight=False, markup=False, style="dim")
        return
    for s in steps:
        console.print(f"{s.kind}: {s.rel:+.1%} per iteration ({fmt_ns(s.before_ns)} -> {fmt_ns(s.after_ns)}) at "
                      f"{step_range(s)}", highlight=False, markup=False)
