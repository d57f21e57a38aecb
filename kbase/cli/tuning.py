"""How the ``kbase`` process runs: the performance policies of the command line, in one place.

They change process-wide state (the C library's allocator, numpy's CPU dispatch, the GIL's switch interval,
how the process ends), so only the command line applies them (:func:`apply` before numpy is imported, then
:func:`leave`); the Python API changes nothing process-wide. Each has a switch and a test
(``tests/cli/test_memory_policy.py``, ``test_cpu_policy.py``, ``test_main_exit.py``); docs/performance.md
gives the measurements.

- :func:`keep_freed_memory`: freed memory stays in the process, one malloc arena, no huge pages
  (``KBASE_MALLOC=system``: off).
- :func:`sort_without_avx512_on_zen4`: numpy's AVX2 sort on AMD Zen 4 (a user's ``NPY_DISABLE_CPU_FEATURES`` or
  ``NPY_ENABLE_CPU_FEATURES`` stands).
- ``SWITCH_INTERVAL_S``: the GIL handed over every 0.2 ms.
- :func:`leave`: the quick exit (``KBASE_NO_FAST_EXIT=1``: the ordinary one).
"""

from __future__ import annotations

import os
import sys
import threading
from typing import NoReturn


def leave(rc: int) -> NoReturn:
    """Exit with ``rc`` now, skipping interpreter teardown when that loses nothing.

    A finished command has nothing left to do, yet interpreter teardown (finalising every module and object:
    pandas, SQLAlchemy, pydantic) took a median 30-118 ms after ``kbase list``, ``show``, a stored diff or gate,
    against 2-17 ms with ``os._exit`` (``benchmarks/quick_exit.py``, docs/performance.md). The caller has flushed
    and closed what matters — ``kbase.cli.main`` disposes every store engine (connections closed, SQLite WAL
    checkpointed) — and this falls back to the ordinary exit whenever the quick one is not clearly safe: another
    thread is still running, a flush fails (a closed pipe is then reported as usual), or ``KBASE_NO_FAST_EXIT``
    is set."""
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
    9.3-9.4 s, at a 0.90-0.92 GiB peak instead of 0.76-0.89. All threads share one malloc arena: the reader's
    threads free their arrays where the main thread's next ones can take them (glibc gives each thread an arena
    of its own, and the iteration window paid fresh pages for every temporary: 1M kernels 99 ms against 73).
    ``KBASE_MALLOC=system`` leaves all three alone; other C libraries than glibc (no ``mallopt``) keep their own
    policy. Set before numpy is imported."""
    if os.environ.get("KBASE_MALLOC", "") == "system":
        return
    os.environ.setdefault("NUMPY_MADVISE_HUGEPAGE", "0")  # numpy reads it once, at import
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError, TypeError):
        return
    m_trim_threshold, m_mmap_max, m_arena_max = -1, -4, -8  # <malloc.h>
    mallopt(m_mmap_max, 0)
    mallopt(m_trim_threshold, 2**31 - 1)
    mallopt(m_arena_max, 1)


def no_blas_threads() -> None:
    """numpy's OpenBLAS starts a thread per core at import, which spins waiting for matrix work kbase never
    gives it (kbase calls no BLAS routine): 3-5% of the CPU seconds of ``kbase top`` of 1M kernels and of a
    stored ``kbase diff`` (interleaved, 15 pairs each). One thread, unless the user asked for more. Set
    before numpy is imported."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


# numpy's CPU features to leave out on AMD Zen 4, by numpy release (each list exactly as that release names its
# dispatch targets: a name it does not know is an ImportWarning, an error under ``-W error``).
_AVX512_2_0 = "AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL"
_AVX512_TARGETS = {
    (2, 0): _AVX512_2_0,
    (2, 1): _AVX512_2_0,
    (2, 2): _AVX512_2_0,
    (2, 3): _AVX512_2_0 + " AVX512_SPR",
    (2, 4): "X86_V4 AVX512_ICL AVX512_SPR",
}


def sort_without_avx512_on_zen4(cpuinfo: str = "/proc/cpuinfo") -> None:
    """On AMD Zen 4, numpy sorts with its AVX2 code instead of its AVX-512 code.

    numpy's AVX-512 sort (x86-simd-sort) writes through ``vpcompress`` to memory, which Zen 4 runs in microcode
    (AMD's optimisation guide says to avoid it; Zen 5 fixed it). ``np.sort`` of 1M int64 took 50 ms there, and
    10 ms with numpy's AVX2 sort: the leaderboard sorts every launch and the launch sketches sort them again
    (a 10M-kernel snapshot). numpy reads ``NPY_DISABLE_CPU_FEATURES`` once, at import; Zen 4 runs AVX-512
    arithmetic as two 256-bit halves, so the other kernels lose little. Only for numpy releases whose target
    names are known (2.0-2.4), and never over a user's own ``NPY_DISABLE_CPU_FEATURES`` or
    ``NPY_ENABLE_CPU_FEATURES`` (an empty one keeps numpy's choice). Set before numpy is imported."""
    if "NPY_DISABLE_CPU_FEATURES" in os.environ or "NPY_ENABLE_CPU_FEATURES" in os.environ:
        return
    try:
        with open(cpuinfo, "rb") as fh:
            head = fh.read(16384).decode("ascii", "replace")
    except OSError:
        return
    first = head.split("\n\n", 1)[0]  # the first processor's block
    fields = dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in first.splitlines()))
    zen4 = (fields.get("vendor_id") == "AuthenticAMD" and fields.get("cpu family") == "25"
            and "avx512f" in fields.get("flags", "").split())
    if not zen4:
        return
    release = _numpy_release()
    if release in _AVX512_TARGETS:
        os.environ["NPY_DISABLE_CPU_FEATURES"] = _AVX512_TARGETS[release]


def _numpy_release() -> tuple[int, int] | None:
    """(major, minor) of the numpy the import system would load, from its ``version.py``, without importing it."""
    import re  # (loaded by the command line anyway)

    for entry in sys.path:
        try:
            with open(os.path.join(entry or ".", "numpy", "version.py"), encoding="utf-8") as fh:
                found = re.search(r"""^version = ["'](\d+)\.(\d+)""", fh.read(4096), re.MULTILINE)
        except OSError:
            continue
        return (int(found[1]), int(found[2])) if found else None
    return None


def apply() -> None:
    """The command line's process policies, before numpy is imported."""
    keep_freed_memory()
    no_blas_threads()
    sort_without_avx512_on_zen4()
    sys.setswitchinterval(SWITCH_INTERVAL_S)
