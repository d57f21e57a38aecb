"""``kbase top``: the kernel leaderboard of a profile."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kbase.cli.app import (
    DbOpt,
    FormatOpt,
    LimitOpt,
    RepoOpt,
    app,
    check_choice,
    console,
    default_limit,
    make_settings,
    reading_progress,
    window_options,
)
from kbase.enums import LeaderboardFormat

if TYPE_CHECKING:
    from kbase.analysis.leaderboard import Leaderboard


@app.command()
@window_options
def top(
    profile: Annotated[Path, typer.Argument(help="Nsight Systems SQLite export, .nsys-rep, or PyTorch profiler "
                                                 "trace (file or per-rank directory).")],
    per_gpu: Annotated[bool, typer.Option("--per-gpu", help="One row per (GPU, kernel).")] = False,
    fmt: FormatOpt = "table",
    limit: LimitOpt = None,
    repo: RepoOpt = None,
    db: DbOpt = None,
    no_store: Annotated[bool, typer.Option(
        "--no-store", help="Always read the file, even when it is stored at the current commit.")] = False,
    window: dict[str, Any] | None = None,
) -> None:
    """Kernel leaderboard of a profile over an iteration-aligned window (from the store when this very
    file was snapshotted at the current commit with the same window)."""
    import kbase

    fmt = check_choice(fmt, LeaderboardFormat)
    settings = make_settings(repo=repo, db=db, window=window)
    with reading_progress(profile.name) as progress:
        lb = kbase.top(profile, settings, per_gpu=per_gpu, progress=progress, from_store=not no_store)
    emit_leaderboard(lb, fmt, default_limit(fmt, limit))


def emit_leaderboard(lb: Leaderboard, fmt: str, limit: int | None, title: str = "Kernel leaderboard",
                     extra: dict[str, Any] | None = None) -> None:
    from kbase.render import leaderboard as render

    if fmt == LeaderboardFormat.JSON:
        sys.stdout.write(render.leaderboard_json(lb, limit, extra) + "\n")
    elif fmt == LeaderboardFormat.CSV:
        sys.stdout.write(render.leaderboard_csv(lb, limit))
    elif fmt == LeaderboardFormat.MD:
        sys.stdout.write(render.leaderboard_md(lb, limit))
    else:
        render.print_leaderboard(lb, console(), limit, title)
