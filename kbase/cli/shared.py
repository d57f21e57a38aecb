"""The Typer app, the options several commands share, and the one place errors become exit codes.

Heavy imports stay inside commands so that ``kbase --help`` starts fast. Every command is
parse -> ``Settings`` -> one ``kbase.api`` call -> render.
"""

from __future__ import annotations

import functools
import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from kbase.cli.errors import failure
from kbase.cli.output import (  # noqa: F401 - the commands' one import
    console,
    default_limit,
    reading_progress,
    terminal_width_env,
)
from kbase.cli.settings_flags import (  # noqa: F401 - the commands' imports (their home before)
    WINDOW_FLAGS,
    check_choice,
    current_settings,
    make_settings,
)


class KbaseGroup(TyperGroup):
    """Runs a command and maps what it raises to one line on stderr and an exit code (also under
    Typer's ``CliRunner``): ``KbaseError`` -> its code (2), anything else -> 3 (``KBASE_DEBUG=1`` re-raises)."""

    def invoke(self, ctx: Any) -> Any:
        from kbase.errors import KbaseError

        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, KeyboardInterrupt):
            raise
        except Exception as exc:
            if not isinstance(exc, KbaseError | UnicodeEncodeError) and (
                    _is_click_exception(exc) or os.environ.get("KBASE_DEBUG")):
                raise
            code, line = failure(exc, current_settings())
            typer.echo(line, err=True)
            raise typer.Exit(code) from None


def _is_click_exception(exc: BaseException) -> bool:
    from typer._click.exceptions import ClickException

    return isinstance(exc, ClickException)


CONTEXT = {"help_option_names": ["-h", "--help"]}

app = typer.Typer(
    name="kbase",
    cls=KbaseGroup,
    help="Keep every commit's GPU kernel leaderboard and tell each change which kernels got fatter.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings=CONTEXT,
)

# ------------------------------------------------------------------------------------------ shared options

MarkerOpt = Annotated[str | None, typer.Option(
    "--marker", help="Regex for iteration ranges (NVTX / annotations). Default: auto-detect ProfilerStep#N, "
    "step N, iteration N, train_step.")]
IterKernelOpt = Annotated[str | None, typer.Option(
    "--iteration-kernel", help="Regex: start a new iteration at each launch of a matching kernel (when there "
    "is no marker).")]
IterationsOpt = Annotated[str | None, typer.Option(
    "--iterations", help="A:B slice of detected iterations (positions, Python slice rules); overrides the "
    "warm-up skip.")]
WarmupOpt = Annotated[int | None, typer.Option(
    "--warmup", help="Warm-up iterations to skip (default: 1 when at least 3 iterations exist).")]
TrimOpt = Annotated[tuple[float, float] | None, typer.Option(
    "--trim", help="START END seconds on the capture clock (not iteration-aligned).")]
AllowMissingRanksOpt = Annotated[bool | None, typer.Option(
    "--allow-missing-ranks/--no-allow-missing-ranks",
    help="Read a run whose ranks cannot all be read (or have no step markers) without them; every output "
    "shows the loss. Default: refuse.")]
GpuOpt = Annotated[int | None, typer.Option("--gpu", help="Only this GPU (index as listed by --per-gpu).")]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table, json, csv, md, bmf or github-benchmark.")]
LimitOpt = Annotated[int | None, typer.Option(
    "--limit", "-n", help="Rows to show (0: all). Default: 20 for table/md, all for json/csv.")]
DbOpt = Annotated[str | None, typer.Option(
    "--db", help="Store URL or SQLite path (default: KBASE_DB, [tool.kbase] db, or .kbase/kbase.db at the git "
    "top level).")]
NameOpt = Annotated[str | None, typer.Option("--name", help="Workload name (one repository can track several jobs).")]
RepoOpt = Annotated[Path | None, typer.Option("--repo", help="Git repository (default: the current directory's).")]
WideOpt = Annotated[bool, typer.Option(
    "--wide", help="Every column, uncut (rows may be longer than the terminal; try `less -S`).")]
FullNamesOpt = Annotated[bool, typer.Option("--full-names", help="Full demangled kernel names instead of short ones.")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="Print only the essential result (one line).")]
GpuHourCostOpt = Annotated[float | None, typer.Option(
    "--gpu-hour-cost", help="Price of one GPU-hour (default: KBASE_GPU_HOUR_COST, [tool.kbase] gpu_hour_cost): with "
    "--fleet-gpus, the change's cost per month is stated.")]
FleetGpusOpt = Annotated[int | None, typer.Option(
    "--fleet-gpus", help="GPUs that run this job around the clock (default: KBASE_GPUS, [tool.kbase] gpus).")]

WINDOW_OPTIONS: dict[str, Any] = {"marker": MarkerOpt, "iteration_kernel": IterKernelOpt,
                                  "iterations": IterationsOpt, "warmup": WarmupOpt, "trim": TrimOpt, "gpu": GpuOpt,
                                  "allow_missing_ranks": AllowMissingRanksOpt}
assert tuple(WINDOW_OPTIONS) == WINDOW_FLAGS  # the plain diff/gate path (``cli.fast_diff``) hands over the same dict


def window_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The one definition of the window options (--marker, --iteration-kernel, --iterations, --warmup,
    --trim, --gpu): added to a command's signature, handed to it as one ``window`` dict of flags."""
    sig = inspect.signature(command, eval_str=True)
    params = [p for p in sig.parameters.values() if p.name != "window"]
    params += [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
               for name, annotation in WINDOW_OPTIONS.items()]

    @functools.wraps(command)
    def with_window(*args: Any, **kwargs: Any) -> Any:
        window = {name: kwargs.pop(name, None) for name in WINDOW_OPTIONS}
        return command(*args, window=window, **kwargs)

    with_window.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    with_window.__annotations__ = {p.name: p.annotation for p in params}
    return with_window


def _version(value: bool) -> None:
    if value:
        from kbase.version import __version__

        print(f"kbase {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Keep every commit's GPU kernel leaderboard and tell each change which kernels got fatter.

    Pipeline: read a profile -> pick the window -> build the leaderboard -> store it -> diff two
    baselines -> decide the gate -> render.
    """
