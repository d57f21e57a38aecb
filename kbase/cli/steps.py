"""``kbase steps``: step changes and slow creep of every kernel over a workload's recent baselines."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kbase.cli.shared import DbOpt, NameOpt, RepoOpt, WideOpt, app, check_choice, console, make_settings
from kbase.enums import StepsFormat


@app.command()
def steps(
    name: NameOpt = None,
    last: Annotated[int, typer.Option("--last", "-n", min=4, help="How many recent baselines to look at.")] = 50,
    rev: Annotated[str, typer.Option("--rev", help="The line of commits: first parents of this revision.")] = "HEAD",
    fmt: Annotated[str, typer.Option("--format", "-f", help="table or json.")] = "table",
    db: DbOpt = None,
    repo: RepoOpt = None,
    wide: WideOpt = False,
) -> None:
    """Step changes across all kernels of a workload, largest effect on the iteration first (creep:
    several small steps in one direction, with their cumulative size)."""
    import kbase
    from kbase.render.steps import print_steps, steps_doc

    fmt = check_choice(fmt, StepsFormat)
    settings = make_settings(repo=repo, db=db, name=name)
    report = kbase.steps(settings, workload=name, last=last, rev=rev)
    if fmt == StepsFormat.JSON:
        from kbase import jsonable

        sys.stdout.write(jsonable.dumps(steps_doc(report)) + "\n")
        return
    print_steps(report, console(), wide=wide)
