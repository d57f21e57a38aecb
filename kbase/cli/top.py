"""``kbase top``: the kernel leaderboard of a profile."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from kbase.cli.output import emit_leaderboard, emit_op_leaderboard
from kbase.cli.shared import (
    DbOpt,
    FormatOpt,
    FullNamesOpt,
    LimitOpt,
    QuietOpt,
    RepoOpt,
    WideOpt,
    app,
    check_choice,
    default_limit,
    make_settings,
    reading_progress,
    window_options,
)
from kbase.enums import GroupBy, LeaderboardFormat


@app.command()
@window_options
def top(
    profile: Annotated[Path, typer.Argument(help="Nsight Systems SQLite export, .nsys-rep, or PyTorch profiler "
                                                 "trace (file or per-rank directory).")],
    per_gpu: Annotated[bool, typer.Option("--per-gpu", help="One row per (GPU, kernel).")] = False,
    fmt: FormatOpt = "table",
    limit: LimitOpt = None,
    repo: RepoOpt = None,
    wide: WideOpt = False,
    full_names: FullNamesOpt = False,
    quiet: QuietOpt = False,
    db: DbOpt = None,
    no_store: Annotated[bool, typer.Option(
        "--no-store", help="Always read the file, even when it is stored at the current commit or cached.")] = False,
    no_cache: Annotated[bool, typer.Option(
        "--no-cache", help="Read the file rather than answer from the top cache (the leaderboard an earlier "
        "`kbase top` of this very file computed), and keep nothing in it.")] = False,
    by: Annotated[str, typer.Option(
        "--by", help="kernel (one row per kernel) or op: grouped by the op that launched each kernel (PyTorch "
        "profiler cpu_op, NVTX range), with its kernels below it.")] = "kernel",
    window: dict[str, Any] | None = None,
) -> None:
    """Kernel leaderboard of a profile over an iteration-aligned window (from the store when this very
    file was snapshotted at the current commit with the same window; from the top cache beside the store
    when an earlier `kbase top` computed it)."""
    import kbase

    fmt = check_choice(fmt, LeaderboardFormat)
    by_op = check_choice(by, GroupBy, flag="--by") == GroupBy.OP
    if by_op and (per_gpu or fmt in (LeaderboardFormat.BMF, LeaderboardFormat.GITHUB_BENCHMARK)):
        from kbase.errors import InputError

        raise InputError("--by op takes neither --per-gpu nor the bmf / github-benchmark formats", field="by",
                         value=by)
    settings = make_settings(repo=repo, db=db, window=window)
    with reading_progress(profile.name, quiet=quiet) as progress:
        lb = kbase.top(profile, settings, per_gpu=per_gpu, progress=progress, from_store=not no_store and not by_op,
                       stored_rows=True, ops=by_op or None, cache=not (no_store or no_cache or by_op))
    if by_op:
        emit_op_leaderboard(lb, fmt, default_limit(fmt, limit), wide=wide, full_names=full_names, quiet=quiet)
        return
    emit_leaderboard(lb, fmt, default_limit(fmt, limit), wide=wide, full_names=full_names, quiet=quiet)
