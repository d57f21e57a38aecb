"""Render detected steps and creeps (``comparison.changepoints.KernelStep``): the ``kbase steps`` table
and JSON (schema ``kbase.steps/1``), and the steps section of ``kbase history`` (table, JSON, CSV).

Kernel names and workloads are data: every cell goes through ``layout.print_table`` (inert text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbase.analysis.names import display_map
from kbase.render.baselines import SUBJECT_WIDTH
from kbase.render.columns import Column
from kbase.units import ABSENT, column_unit, fmt_ns

if TYPE_CHECKING:
    from collections.abc import Mapping

    from kbase.comparison.changepoints import KernelStep
    from kbase.comparison.history import StepsReport
    from kbase.gitrepo import CommitNote

COLUMNS = [
    Column("kind", "kind", 0, justify="left"),
    Column("kernel", "kernel", 0, min_width=12, want_width=32, max_width=80, justify="left", shrink=True,
           keep_tail=True),
    Column("commits", "commits", 0, justify="left"),
    Column("date", "date", 4, justify="left"),
    Column("subject", "subject", 2, min_width=12, want_width=20, max_width=SUBJECT_WIDTH, justify="left",
           shrink=True),
    Column("before", "before/iter", 3),
    Column("after", "after/iter", 3),
    Column("change", "change", 0),
    Column("effect", "effect on iter", 1),
]


def step_dict(s: KernelStep) -> dict[str, Any]:
    return {"name": s.name, "short_name": s.short_name, "kind": s.kind, "from_commit": s.from_commit,
            "first_commit": s.first_commit, "to_commit": s.to_commit, "before_ns": s.before_ns, "after_ns": s.after_ns,
            "rel": s.rel, "effect": s.effect, "steps": s.steps, "z": s.z}


def _commit_fields(note: CommitNote | None) -> dict[str, Any]:
    """The subject and date of the commit a step lands on (``first_commit``), as JSON states them."""
    date = note.date if note is not None else None
    return {"subject": note.subject if note is not None else "", "commit_date": date.isoformat() if date else None}


def steps_doc(report: StepsReport) -> dict[str, Any]:
    from kbase import jsonable
    from kbase.comparison.changepoints import STEPS_SCHEMA

    notes = report.commit_notes
    return jsonable.clean({"schema": STEPS_SCHEMA, "workload": report.workload, "baselines": report.baselines,
                           "commits": report.commits, "notes": report.notes,
                           "setup_changes": [c.as_dict() for c in report.setup_changes],
                           "steps": [step_dict(s) | _commit_fields(notes.get(s.first_commit)) for s in report.steps]})


def step_range(s: KernelStep) -> str:
    if s.kind == "creep":
        return f"{s.from_commit[:10]}..{s.to_commit[:10]} ({s.steps} steps)"
    return f"{s.from_commit[:10]}..{s.to_commit[:10]}"


def step_label(s: KernelStep) -> str:
    """One cell: what changed and by how much (a creep: its cumulative size and its steps)."""
    return f"{s.kind} {s.rel:+.1%}" + (f" ({s.steps} steps)" if s.kind == "creep" else "")


def table_cells(steps: list[KernelStep], notes: Mapping[str, CommitNote]) -> list[dict[str, str]]:
    """The screen rows: before and after in one unit (``units.column_unit``), the commit the step lands on
    with its date and subject."""
    unit = column_unit([v for s in steps for v in (s.before_ns, s.after_ns)])
    labels = display_map([(s.name, s.short_name) for s in steps])  # a #id where two share a short name
    out = []
    for s in steps:
        note = notes.get(s.first_commit)
        out.append({"kind": s.kind, "kernel": labels[s.name], "commits": step_range(s),
                    "date": note.date.strftime("%Y-%m-%d") if note is not None and note.date else ABSENT,
                    "subject": note.subject if note is not None else "", "before": unit(s.before_ns),
                    "after": unit(s.after_ns), "change": f"{s.rel:+.1%}",
                    "effect": "-" if s.effect != s.effect else f"{s.effect:+.2%}"})
    return out


def print_steps(report: StepsReport, console: Any, wide: bool = False) -> None:
    from kbase.render.layout import inert, print_table

    for n in report.notes:
        console.print(f"note: {inert(n)}", highlight=False, markup=False)
    title = (f"{len(report.steps)} step(s) in {report.workload!r} over {report.baselines} baseline(s), "
             f"{len(report.commits)} commit(s)")
    print_table(console, COLUMNS, table_cells(report.steps, report.commit_notes), wide=wide, title=title,
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
