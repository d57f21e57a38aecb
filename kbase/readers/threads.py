"""How many threads a reader decodes with: a second one only while a core is idle.

The nsys reader decodes the kernel and the runtime table at once, on two threads: on idle cores that
shortens the answer (the runtime table is about a third of the reading). A second thread is not free, though
(scheduling, caches shared: 5-9% more CPU seconds for ``kbase top`` of 1M kernels), and where every core is
busy — a CI runner running other jobs — it shortens nothing: both threads wait for the same cores. So the
reader takes the second thread only when fewer tasks are runnable right now than the machine has cores
(Linux's ``/proc/loadavg``, which counts this one); ``KBASE_READ_THREADS`` (1 or 2) decides instead.
"""

from __future__ import annotations

import os


def reader_threads(loadavg: str = "/proc/loadavg") -> int:
    """1 or 2: the threads the reader may decode with now (see the module)."""
    fixed = os.environ.get("KBASE_READ_THREADS", "")
    if fixed in ("1", "2"):
        return int(fixed)
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count() or 1
    if usable < 2:
        return 1
    try:
        with open(loadavg, encoding="ascii") as fh:
            runnable = int(fh.read().split()[3].split("/")[0])  # "0.52 0.58 0.59 2/467 12345": 2 runnable now
    except (OSError, ValueError, IndexError):
        return 2  # no such count here (not Linux): as on idle cores
    return 2 if runnable < (os.cpu_count() or usable) else 1
