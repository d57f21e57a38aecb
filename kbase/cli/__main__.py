"""The ``kbase`` script and ``python -m kbase.cli``: ``kbase.cli.main``, then a quick exit.

A finished command has nothing left to do, yet interpreter teardown (finalising every module and
object: pandas, SQLAlchemy, pydantic) cost 0.26–0.33 s after a stored diff. ``run`` flushes and closes
what matters first — ``main`` has disposed every store engine (connections closed, SQLite WAL
checkpointed) — then leaves with ``os._exit``. It falls back to the ordinary exit whenever that is
not clearly safe: another thread is still running, a flush fails (a closed pipe is then reported as
usual), or ``KBASE_NO_FAST_EXIT`` is set. ``main`` itself keeps ``sys.exit``, for callers in-process.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import NoReturn


def leave(rc: int) -> NoReturn:
    """Exit with ``rc`` now, skipping interpreter teardown when that loses nothing."""
    if os.environ.get("KBASE_NO_FAST_EXIT", "") not in ("", "0") or threading.active_count() > 1:
        sys.exit(rc)
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(rc)  # the ordinary path reports or swallows it as before
    if "logging" in sys.modules:
        sys.modules["logging"].shutdown()  # flush and close any handler a library attached
    os._exit(rc)


def run() -> NoReturn:
    from kbase.cli import main

    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    if not isinstance(code, int):
        sys.exit(str(code))  # a message: let Python print it as usual
    leave(code)


if __name__ == "__main__":
    run()
