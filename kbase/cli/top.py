"""``kbase top``: the kernel leaderboard of a profile."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from kbase.cli.app import (
    DbOpt,
    FormatOpt,
    FullNamesOpt,
    LimitOpt,
    QuietOpt,
    RepoOpt,
    WideOpt,
    app,
    check_choice,
    console,
    default_limit,
    make_settings,
    reading_progress,
    window_options,
)
from kbase.enums import GroupBy, LeaderboardFormat

if TYPE_CHECKING:
    from kbase.analysis.board import AnyLeaderboard


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
        "--no-store", help="Always read the file, even when it is stored at the current commit.")] = False,
    by: Annotated[str, typer.Option(
        "--by", help="kernel (one row per kernel) or op: grouped by the op that launched each kernel (PyTorch "
        "profiler cpu_op, NVTX range), with its kernels below it.")] = "kernel",
    window: dict[str, Any] | None = None,
) -> None:
    """Kernel leaderboard of a profile over an iteration-aligned window (from the store when this very
    file was snapshotted at the current commit with the same window)."""
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
                       stored_rows=True, ops=by_op or None)
    if by_op:
        emit_op_leaderboard(lb, fmt, default_limit(fmt, limit), wide=wide, full_names=full_names, quiet=quiet)
        return
    emit_leaderboard(lb, fmt, default_limit(fmt, limit), wide=wide, full_names=full_names, quiet=quiet)


def emit_op_leaderboard(lb: Any, fmt: str, limit: int | None, wide: bool = False, full_names: bool = False,
                        quiet: bool = False) -> None:
    from kbase.render import ops as render

    if fmt == LeaderboardFormat.JSON:
        sys.stdout.write(render.op_leaderboard_json(lb, limit) + "\n")
    elif fmt == LeaderboardFormat.CSV:
        sys.stdout.write(render.op_leaderboard_csv(lb, limit))
    elif fmt == LeaderboardFormat.MD:
        sys.stdout.write(render.op_leaderboard_md(lb, limit, full_names=full_names))
    elif quiet:
        rows = render.op_rows(lb)
        top = f"; top op: {rows[0]['op'] or render.NO_OP_LABEL}" if rows else ""
        console().print(f"{len(rows)} ops{top}" if lb.ops is not None else render.no_ops_note("table", lb.notes),
                        highlight=False, markup=False, soft_wrap=True)
    else:
        render.print_op_leaderboard(lb, console(), limit, wide=wide, full_names=full_names)


def quiet_line(lb: AnyLeaderboard) -> str:
    """The leaderboard in one line: kernel time per iteration per GPU and the top kernel."""
    from kbase.analysis.board import board_of
    from kbase.render.layout import inert
    from kbase.units import fmt_ns, fmt_pct

    board = board_of(lb)
    s, rows = board.summary, board.rows
    top = rows[0] if rows else None
    per_iter = fmt_ns(s.kernel_ns_per_iter) + " kernel time per iteration per GPU" if s.kernel_ns_per_iter is not None \
        else f"{fmt_ns(float(sum(r['total_ns'] for r in rows)))} kernel time in the window"
    head = f"{len(rows)} kernels, {per_iter}"
    if top is not None:
        head += f"; top: {inert(str(top['short_name']))} {fmt_pct(top['share_kernel'])}"
    return head


def emit_leaderboard(lb: AnyLeaderboard, fmt: str, limit: int | None, title: str = "Kernel leaderboard",
                     extra: dict[str, Any] | None = None, wide: bool = False, full_names: bool = False,
                     quiet: bool = False) -> None:
    from kbase.render import leaderboard as render

    if fmt == LeaderboardFormat.JSON:
        sys.stdout.write(render.leaderboard_json(lb, limit, extra) + "\n")
    elif fmt == LeaderboardFormat.CSV:
        sys.stdout.write(render.leaderboard_csv(lb, limit))
    elif fmt == LeaderboardFormat.MD:
        sys.stdout.write(render.leaderboard_md(lb, limit, full_names=full_names))
    elif fmt in (LeaderboardFormat.BMF, LeaderboardFormat.GITHUB_BENCHMARK):
        from kbase.render import interop

        meta = extra or {}
        workload = str(meta.get("workload") or (meta.get("baseline") or {}).get("workload") or "kbase")
        doc = (interop.bmf_from_leaderboard(lb, workload, limit or 0) if fmt == LeaderboardFormat.BMF
               else interop.gab_from_leaderboard(lb, workload, limit or 0))
        sys.stdout.write(interop.dumps_strict(doc) + "\n")
    elif quiet:
        console().print(quiet_line(lb), highlight=False, markup=False, soft_wrap=True)
    else:
        render.print_leaderboard(lb, console(), limit, title, wide=wide, full_names=full_names)
