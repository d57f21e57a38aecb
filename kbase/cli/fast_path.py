"""What the pre-Typer answers share (``cli.fast_top``, ``cli.fast_diff``, ``cli.fast_history``): a plain command
answered before the command line is built loads its settings as ``make_settings`` does and runs as the command
line runs a command (closed-pipe guard, one-line errors with the command's exit code, store connections closed).
Each of those modules only parses its command's plain form; every answer goes through the command's own API call
and renderer, and anything else is the command line's (tests hold each path equal to Typer's)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def load_settings(repo: str | None, db: str | None, name: str | None = None) -> Any:
    """The command's ``Settings`` (as ``make_settings`` loads them for these flags), dependencies' warnings off
    as the command line turns them off; None on a settings error (the command line words it, naming the flag
    or key)."""
    import warnings

    from kbase.settings import Settings

    if not os.environ.get("KBASE_DEBUG"):
        warnings.simplefilter("ignore")  # as the command line does
    try:
        return Settings.load(repo=None if repo is None else Path(repo), db=db, name=name, window={})
    except Exception:  # noqa: BLE001 - the command line says what is wrong, naming the flag or key
        return None


def run_as_command(settings: Any, work: Callable[[], int | None]) -> int:
    """``work`` (the command's API call and renderer; its exit code, None for 0) run as the command line runs a
    command: stdout guarded against a closed pipe, an error one line on stderr with the command's exit code
    (``errors.failure``, naming what ``settings`` holds: the settings, or a function returning those the command
    made), store connections closed after; the exit code."""
    from kbase.cli.closed_stdout import guard_stdout

    guard_stdout()
    try:
        code = work()
    except KeyboardInterrupt:
        print("kbase: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - mapped as the command line maps it (``errors.failure``)
        from kbase.cli.errors import failure
        from kbase.errors import KbaseError

        if os.environ.get("KBASE_DEBUG") and not isinstance(exc, KbaseError | UnicodeEncodeError):
            raise
        code, line = failure(exc, settings() if callable(settings) else settings)
        print(line, file=sys.stderr)
        return code
    finally:
        if "kbase.store.engine" in sys.modules:  # close pooled store connections before the process ends
            sys.modules["kbase.store.engine"].dispose_all()
    return code or 0
