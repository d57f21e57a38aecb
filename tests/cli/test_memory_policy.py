"""The command line's memory policy (``kbase.cli.tuning.keep_freed_memory``): on glibc a large array is no
longer its own mmap (freed memory stays for the next one), what a thread frees the main thread reuses (one
arena), numpy asks for no huge pages, a user's setting stands and ``KBASE_MALLOC=system`` turns it all off.
Each case runs in a fresh interpreter."""

import json
import os
import subprocess
import sys

import pytest

from helpers.shared import REPO

PROBE = """
import ctypes, json, os, sys
sys.path.insert(0, {repo!r})
from kbase.cli.tuning import keep_freed_memory
keep_freed_memory()
import numpy as np
mmapped = None
try:
    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                   "fsmblks", "uordblks", "fordblks", "keepcost")]
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = Info
    before = mallinfo2().hblks
    a = np.ones(50_000_000 // 8)  # 50 MB: an mmap of its own under glibc's default policy
    mmapped = mallinfo2().hblks - before
except AttributeError:
    pass
import threading
freed = {{}}
def on_a_thread():
    b = np.ones(4_000_000)  # 32 MB, freed on this thread
    freed["at"] = b.ctypes.data
t = threading.Thread(target=on_a_thread)
t.start()
t.join()
reused = np.ones(4_000_000).ctypes.data == freed["at"]  # one arena: the main thread's next array takes it
print(json.dumps({{"hugepage": os.environ.get("NUMPY_MADVISE_HUGEPAGE"), "mmapped": mmapped, "reused": reused}}))
"""


def _probe(**env: str) -> dict:
    full = {k: v for k, v in os.environ.items() if k not in ("KBASE_MALLOC", "NUMPY_MADVISE_HUGEPAGE")} | env
    out = subprocess.run([sys.executable, "-c", PROBE.format(repo=str(REPO))], env=full, capture_output=True,
                         text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_freed_memory_is_kept_and_no_huge_pages_are_asked_for():
    got = _probe()
    assert got["hugepage"] == "0"
    if got["mmapped"] is None:
        pytest.skip("not glibc (no mallinfo2): the C library keeps its own policy")
    assert got["mmapped"] == 0
    assert got["reused"]


def test_kbase_malloc_system_and_a_users_setting_stand():
    system = _probe(KBASE_MALLOC="system")
    assert system["hugepage"] is None
    if system["mmapped"] is not None:
        assert system["mmapped"] == 1  # glibc's own policy: the large array is an mmap
        assert not system["reused"]  # and an arena per thread
    assert _probe(NUMPY_MADVISE_HUGEPAGE="1")["hugepage"] == "1"


def test_the_kbase_script_runs_with_the_policy(tiny_export):
    r = subprocess.run([sys.executable, "-m", "kbase.cli", "top", str(tiny_export), "-f", "json", "--no-store"],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kernels"]


def test_the_command_line_hands_the_gil_over_every_fifth_of_a_millisecond():
    """``run()`` sets the switch interval (``SWITCH_INTERVAL_S``): a numpy thread beside a Python one (the
    leaderboard's aggregate beside the name classification) otherwise waits up to 5 ms per numpy call. The
    library alone leaves Python's default."""
    probe = (f"import sys; sys.path.insert(0, {str(REPO)!r}); import kbase.cli, kbase.cli.__main__ as m; "
             "default = sys.getswitchinterval(); "
             "kbase.cli.main = lambda: print(default, sys.getswitchinterval()); m.run()")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    default, in_cli = map(float, out.stdout.split())
    assert default == pytest.approx(0.005) and in_cli == pytest.approx(0.0002)
