"""``kbase steps``: step changes and slow creep of every kernel over a workload's recent baselines."""

from __future__ import annotations

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kbase.cli.app import DbOpt, NameOpt, RepoOpt, app, check_choice, console, make_settings

if TYPE_CHECKING:
    from kbase.comparison.changepoints import KernelStep
    from kbase.comparison.history import StepsReport


class StepsFormat(StrEnum):
    TABLE = "table"
    JSON = "json"


@app.command()
def steps(
    name: NameOpt = None,
    last: Annotated[int, typer.Option("--last", "-n", min=4, help="How many recent baselines to look at.")] = 50,
    rev: Annotated[str, typer.Option("--rev", help="The line of commits: first parents of this revision.")] = "HEAD",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
    db: DbOpt = None,
    repo: RepoOpt = None,
) -> None:
    """Step changes across all kernels of a workload, largest effect on the iteration first (creep:
    several small steps in one direction, with their cumulative size)."""
    import kbase

    fmt = check_choice(fmt, StepsFormat)
    settings = make_settings(repo=repo, db=db, name=name)
    report = kbase.steps(settings, workload=name, last=last, rev=rev)
    if fmt == StepsFormat.JSON:
        from kbase import jsonable

        sys.stdout.write(jsonable.dumps(steps_doc(report)) + "\n")
        return
    print_steps(report)


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


def print_steps(report: StepsReport) -> None:
    from rich.table import Table

    from kbase.render.units import fmt_ns

    out = console()
    for n in report.notes:
        out.print(f"note: {n}", highlight=False, markup=False)
    t = Table(title=f"{len(report.steps)} step(s) in {report.workload!r} over {report.baselines} baseline(s), "
                    f"{len(report.commits)} commit(s)", header_style="bold")
    for h in ("kind", "kernel", "commits", "before/iter", "after/iter", "change", "effect on iter"):
        t.add_column(h, overflow="fold", max_width=60 if h == "kernel" else None)
    for s in report.steps:
        t.add_row(s.kind, s.short_name[:80], step_range(s), fmt_ns(s.before_ns), fmt_ns(s.after_ns), f"{s.rel:+.1%}",
                  "-" if s.effect != s.effect else f"{s.effect:+.2%}",
                  style="red" if s.rel > 0 else "green")
    out.print(t)
