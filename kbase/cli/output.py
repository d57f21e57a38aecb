"""What a command prints, apart from the Typer app: the terminal console, the default row limit and the
leaderboard in each format. ``kbase top`` of a cached file (``cli.fast_top``) prints through here without
importing the command line."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbase.analysis.board import AnyLeaderboard


def default_limit(fmt: str, limit: int | None, table_default: int = 20) -> int | None:
    if limit is None:
        return table_default if fmt in ("table", "md") else None
    return None if limit == 0 else limit


PIPED_WIDTH = 100  # the width of output to a pipe or a file without COLUMNS


def console(stderr: bool = False) -> Any:
    """A Rich console that shows every string as data: no markup, control characters escaped."""
    from kbase.render.console import SafeConsole as Console

    stream = sys.stderr if stderr else sys.stdout
    # Piped output (CI logs, files) is as wide as COLUMNS says, else PIPED_WIDTH: never the widest row (a log
    # read in a browser or a pager wraps at about 100); a terminal's own width is used as it is.
    width = None if stream.isatty() else terminal_width_env() or PIPED_WIDTH
    return Console(stderr=stderr, soft_wrap=False, width=width)


def terminal_width_env() -> int | None:
    """``COLUMNS`` as an int when it is set to one."""
    try:
        return max(int(os.environ.get("COLUMNS", "")), 20)
    except ValueError:
        return None


@contextlib.contextmanager
def reading_progress(label: str, quiet: bool = False) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback for a reader, ``(done now, total)`` in its own unit (rows of an export,
    bytes of a trace): a bar on a terminal, shown once reading has taken over half a second
    (``KBASE_PROGRESS_DELAY`` seconds)."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    import time

    try:
        delay = float(os.environ.get("KBASE_PROGRESS_DELAY", "0.5"))
    except ValueError:
        delay = 0.5
    state: dict[str, Any] = {"start": time.monotonic(), "done": 0}

    def advance(amount: int, total: int) -> None:
        state["done"] += amount
        if "bar" not in state:
            if time.monotonic() - state["start"] < delay or total <= 0:
                return
            from rich.progress import Progress

            state["bar"] = Progress(console=console(stderr=True), transient=True)
            state["bar"].start()
            state["task"] = state["bar"].add_task(f"reading {label}", total=total, completed=state["done"])
            return
        state["bar"].advance(state["task"], amount)

    try:
        yield advance
    finally:
        if state.get("bar") is not None:
            state["bar"].stop()


def emit_op_leaderboard(lb: Any, fmt: str, limit: int | None, wide: bool = False, full_names: bool = False,
                        quiet: bool = False) -> None:
    """The op leaderboard as ``fmt``, by ``render.formats.OP_LEADERBOARD``."""
    from kbase.render.formats import OP_LEADERBOARD, LeaderboardJob, Sink

    job = LeaderboardJob(lb, limit, wide=wide, full_names=full_names, quiet=quiet)
    OP_LEADERBOARD.render(fmt, job, Sink.stdout(console))


def emit_leaderboard(lb: AnyLeaderboard, fmt: str, limit: int | None, title: str = "Kernel leaderboard",
                     extra: dict[str, Any] | None = None, wide: bool = False, full_names: bool = False,
                     quiet: bool = False) -> None:
    """The leaderboard as ``fmt``, by ``render.formats.LEADERBOARD``."""
    from kbase.render.formats import LEADERBOARD, LeaderboardJob, Sink

    job = LeaderboardJob(lb, limit, title, extra, wide=wide, full_names=full_names, quiet=quiet)
    LEADERBOARD.render(fmt, job, Sink.stdout(console))
