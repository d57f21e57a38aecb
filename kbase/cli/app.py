"""The Typer app and the options several commands share. Heavy imports stay inside commands so
that ``kbase --help`` starts fast."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

app = typer.Typer(
    name="kbase",
    help="Keep every commit's GPU kernel leaderboard and tell each change which kernels got fatter.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

MarkerOpt = Annotated[Optional[str], typer.Option("--marker", help="Regex for iteration ranges (NVTX / annotations). Default: auto-detect ProfilerStep#N, step N, iteration N, train_step.")]
IterKernelOpt = Annotated[Optional[str], typer.Option("--iteration-kernel", help="Regex: start a new iteration at each launch of a matching kernel (when there is no marker).")]
IterationsOpt = Annotated[Optional[str], typer.Option("--iterations", help="A:B slice of detected iterations (positions, Python slice rules); overrides the warm-up skip.")]
WarmupOpt = Annotated[Optional[int], typer.Option("--warmup", help="Warm-up iterations to skip (default: 1 when at least 3 iterations exist).")]
TrimOpt = Annotated[Optional[tuple[float, float]], typer.Option("--trim", help="START END seconds on the capture clock (not iteration-aligned).")]
GpuOpt = Annotated[Optional[int], typer.Option("--gpu", help="Only this GPU (index as listed by --per-gpu).")]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table, json, csv or md.")]
LimitOpt = Annotated[Optional[int], typer.Option("--limit", "-n", help="Rows to show (0: all). Default: 20 for table/md, all for json/csv.")]
DbOpt = Annotated[Optional[str], typer.Option("--db", help="Store URL or SQLite path (default: KBASE_DB, [tool.kbase] db, or .kbase/kbase.db at the git top level).")]
NameOpt = Annotated[Optional[str], typer.Option("--name", help="Workload name (one repository can track several jobs).")]
RepoOpt = Annotated[Optional[Path], typer.Option("--repo", help="Git repository (default: the current directory's).")]


def window_spec(marker=None, iteration_kernel=None, iterations=None, warmup=None, trim=None, gpu=None):
    from kbase.analysis.window import WindowSpec

    return WindowSpec(marker=marker, iteration_kernel=iteration_kernel, iterations=iterations,
                      warmup=warmup, trim=tuple(trim) if trim else None, gpu=gpu)


def default_limit(fmt: str, limit: int | None) -> int | None:
    if limit is None:
        return 20 if fmt in ("table", "md") else None
    return None if limit == 0 else limit


def console(stderr: bool = False):
    import sys

    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Piped output (CI logs, files) is not limited to 80 columns: wide tables stay readable.
    width = None if stream.isatty() else 220
    return Console(stderr=stderr, soft_wrap=False, width=width)


def read_with_progress(path: Path):
    """Read a profile, with a progress bar on a terminal for large exports."""
    import sys

    from kbase.readers import detect_format, read_profile

    if detect_format(path) != "nsys-sqlite" or not sys.stderr.isatty():
        return read_profile(path)
    from rich.progress import Progress

    from kbase.readers.nsys import count_kernels

    total = count_kernels(path)
    if total < 200_000:
        return read_profile(path)
    with Progress(console=console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"reading {path.name}", total=total)
        return read_profile(path, progress=lambda n: bar.advance(task, n))


def _version(value: bool) -> None:
    if value:
        from kbase import __version__

        print(f"kbase {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """Keep every commit's GPU kernel leaderboard and tell each change which kernels got fatter.

    Pipeline: read a profile -> pick the window -> build the leaderboard -> store it -> diff two
    baselines -> decide the gate -> render.
    """
