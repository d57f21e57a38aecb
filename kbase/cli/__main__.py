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


# The CLI's threads hand the GIL over every 0.2 ms instead of Python's 5: a thread running numpy between
# short Python steps (the leaderboard's aggregate beside the name classification, a page decode beside
# another) otherwise waits up to 5 ms for the GIL after each numpy call.
SWITCH_INTERVAL_S = 0.0002


def keep_freed_memory() -> None:
    """Memory policy of a kbase process: freed memory stays in the process for the next array, in small pages.

    A capture's work is large numpy arrays made and dropped again and again. glibc hands each block over
    128 KiB-32 MiB back to the kernel on free (munmap), and numpy asks for transparent huge pages, so each
    new array is fresh pages, zeroed by the kernel. On the benchmark VM that cost 0.4 (small pages) to
    4.6 ms (huge pages) per MB: a 10M-kernel snapshot spent 6.2-6.5 s of its 11.7-12.2 s in system time;
    with freed blocks kept (no mmap per block, no trimming) and no huge-page request, 1.8-2.1 s of
    9.3-9.4 s, at a 0.90-0.92 GiB peak instead of 0.76-0.89. ``KBASE_MALLOC=system`` leaves both alone; other C
    libraries than glibc (no ``mallopt``) keep their own policy. Set before numpy is imported."""
    if os.environ.get("KBASE_MALLOC", "") == "system":
        return
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")  # numpy reads it once, at import
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError, TypeError):
        return
    m_trim_threshold, m_mmap_max = -1, -4  # <malloc.h>
    mallopt(m_mmap_max, 0)
    mallopt(m_trim_threshold, 2**31 - 1)


def run() -> NoReturn:
    keep_freed_memory()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
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
