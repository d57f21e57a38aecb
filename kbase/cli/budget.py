"""``kbase budget``: where each GPU's window went (compute, exposed communication, exposed memory, idle)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from kbase.cli.shared import (
    DbOpt,
    NameOpt,
    QuietOpt,
    RepoOpt,
    app,
    check_choice,
    console,
    make_settings,
    reading_progress,
)
from kbase.enums import BudgetFormat


@app.command()
def budget(
    target: Annotated[str, typer.Argument(help="A profile (file or per-rank folder), @ID or a git revision.")],
    window: Annotated[str, typer.Option("--window", help="iterations (the configured window) or all: each GPU's "
                                        "whole capture, first activity to last (as HTA's temporal breakdown).")]
    = "iterations",
    fmt: Annotated[str, typer.Option("--format", help="table or json (kbase.budget/1).")] = "table",
    repo: RepoOpt = None,
    db: DbOpt = None,
    name: NameOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """The GPU time budget: every instant of each GPU's window in exactly one block, compute > communication
    > memory > idle, adding up to 100% of window x GPUs; the idle gaps with their likely cause."""
    import kbase
    from kbase.errors import InputError
    from kbase.render import budget as render

    fmt = check_choice(fmt, BudgetFormat)
    if window not in ("iterations", "all"):
        raise InputError("must be iterations or all", field="window", value=window)
    settings = make_settings(repo=repo, db=db, name=name)
    with reading_progress(str(target), quiet=quiet or fmt == BudgetFormat.JSON) as progress:
        result = kbase.budget(target, settings, window_all=window == "all", progress=progress)
    if fmt == BudgetFormat.JSON:
        sys.stdout.write(render.budget_json(result.budget, result.source) + "\n")
        return
    out = console()
    lines = render.budget_lines(result.budget)
    if result.stored:
        lines.insert(0, f"stored baseline @{result.source.get('baseline')} (per-iteration rows summed over GPUs)")
    for line in (lines[:3] if quiet else lines):
        out.print(line, highlight=False, markup=False, soft_wrap=True)
