"""The ``kbase`` command line: a thin shell over the library API (one module per pipeline stage).

Exit codes: 0 ok, 1 regression found (gate), 2 bad input / usage, 3 internal error.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from kbase.cli.app import (
    FormatOpt, GpuOpt, IterationsOpt, IterKernelOpt, LimitOpt, MarkerOpt, TrimOpt, WarmupOpt, app,
    console, default_limit, read_with_progress, window_spec,
)


@app.command()
def top(
    profile: Annotated[Path, typer.Argument(help="Nsight Systems SQLite export, .nsys-rep, or PyTorch profiler trace (file or per-rank directory).")],
    marker: MarkerOpt = None,
    iteration_kernel: IterKernelOpt = None,
    iterations: IterationsOpt = None,
    warmup: WarmupOpt = None,
    trim: TrimOpt = None,
    gpu: GpuOpt = None,
    per_gpu: Annotated[bool, typer.Option("--per-gpu", help="One row per (GPU, kernel).")] = False,
    fmt: FormatOpt = "table",
    limit: LimitOpt = None,
) -> None:
    """Kernel leaderboard of a profile over an iteration-aligned window."""
    from kbase.analysis.leaderboard import build_leaderboard
    from kbase.render.leaderboard import check_format
    from kbase.analysis.window import select_window

    check_format(fmt)
    prof = read_with_progress(profile)
    w = select_window(prof, window_spec(marker, iteration_kernel, iterations, warmup, trim, gpu))
    lb = build_leaderboard(w, per_gpu=per_gpu)
    emit_leaderboard(lb, fmt, default_limit(fmt, limit))


def emit_leaderboard(lb, fmt: str, limit: int | None, title: str = "Kernel leaderboard", extra: dict | None = None) -> None:
    from kbase.render import leaderboard as render

    if fmt == "json":
        sys.stdout.write(render.leaderboard_json(lb, limit, extra) + "\n")
    elif fmt == "csv":
        sys.stdout.write(render.leaderboard_csv(lb, limit))
    elif fmt == "md":
        sys.stdout.write(render.leaderboard_md(lb, limit))
    else:
        render.print_leaderboard(lb, console(), limit, title)


def _register_commands() -> None:
    # Importing these modules adds their commands to ``app``.
    import kbase.cli.demo  # noqa: F401
    import kbase.cli.diff  # noqa: F401
    import kbase.cli.store  # noqa: F401


def _one_line(msg) -> str:
    """Messages may quote names with newlines (kernel names, paths): keep stderr to one line."""
    return str(msg).strip().replace("\r", "\\r").replace("\n", "\\n")


def main() -> None:
    from kbase.errors import KbaseError

    try:  # typer >= 0.29 vendors click
        from typer._click.exceptions import ClickException
    except ImportError:  # pragma: no cover - older typer on top of click
        from click.exceptions import ClickException

    _register_commands()
    try:
        rc = app(standalone_mode=False)
    except KbaseError as exc:
        print(f"kbase: error: {_one_line(exc)}", file=sys.stderr)
        sys.exit(exc.code)
    except typer.Abort:
        print("kbase: aborted", file=sys.stderr)
        sys.exit(2)
    except ClickException as exc:
        # Usage errors from the option parser: one line, exit 2.
        print(f"kbase: error: {_one_line(exc.format_message())}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("kbase: interrupted", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # noqa: BLE001 - last resort: one line and exit 3, traceback on request
        if os.environ.get("KBASE_DEBUG"):
            raise
        print(f"kbase: internal error: {type(exc).__name__}: {_one_line(exc)} (set KBASE_DEBUG=1 for a traceback)",
              file=sys.stderr)
        sys.exit(3)
    finally:
        if "kbase.store.engine" in sys.modules:  # close pooled store connections before the process ends
            sys.modules["kbase.store.engine"].dispose_all()
    sys.exit(rc if isinstance(rc, int) else 0)


if __name__ == "__main__":
    main()
