"""What the ``kbase`` script's quick exit (``kbase.cli.tuning.leave``: ``os._exit`` once output is flushed and
the stores are closed) saves, interleaved with the ordinary exit (``KBASE_NO_FAST_EXIT=1``).

    python benchmarks/quick_exit.py [--rounds 20] [--out DIR]

On S2's store (two baselines of 2,000 kernels x 99 iterations) it runs ``kbase list``, ``show @1``, ``diff @1 @2
--format json`` and ``gate @1 @2``, each round both ways in alternating order, and prints per command:

- **teardown**: from ``main()`` returning (the child notes ``CLOCK_MONOTONIC``) to the parent's ``wait4``
  returning — what the exit itself costs, apart from the noise of the rest of the run;
- **wall** and **CPU** (user + sys of the child) of the whole command, medians and the median paired difference.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import build_in_child, child_env, loadavg  # noqa: E402
from run import S2_ITERATIONS, S2_KERNELS, compile_kbase  # noqa: E402

CHILD = """
import os, sys, time
import kbase.cli.tuning as tuning
real = tuning.leave
def leave(rc):
    os.write(int(os.environ["KBASE_BENCH_MARK_FD"]), repr(time.monotonic()).encode())
    real(rc)
tuning.leave = leave
sys.argv = ["kbase", *sys.argv[1:]]
from kbase.cli.__main__ import run
run()
"""


def one(args: list[str], cwd: Path, ordinary: bool) -> tuple[float, float, float]:
    """(teardown, wall, CPU) seconds of one ``kbase ARGS``."""
    env = {k: v for k, v in child_env().items() if k != "KBASE_NO_FAST_EXIT"}
    if ordinary:
        env["KBASE_NO_FAST_EXIT"] = "1"
    rfd, wfd = os.pipe()
    env["KBASE_BENCH_MARK_FD"] = str(wfd)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, *args], cwd=cwd, env=env, pass_fds=(wfd,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(wfd)
    _, status, usage = os.wait4(proc.pid, 0)
    end, wall = time.monotonic(), time.perf_counter() - t0
    with os.fdopen(rfd, "rb") as fh:
        mark = fh.read()
    if os.waitstatus_to_exitcode(status) not in (0, 1) or not mark:
        raise SystemExit(f"kbase {' '.join(args)} failed")
    return end - float(mark.decode()), wall, usage.ru_utime + usage.ru_stime


def summary(name: str, quick: list[tuple[float, float, float]], slow: list[tuple[float, float, float]]) -> str:
    def med(rows, i):
        return statistics.median(x[i] for x in rows)

    def paired(i):
        return statistics.median(s[i] - q[i] for q, s in zip(quick, slow))

    return (f"kbase {name}: teardown {med(quick, 0) * 1e3:.1f} ms (quick, max {max(x[0] for x in quick) * 1e3:.1f}) "
            f"vs {med(slow, 0) * 1e3:.1f} ms (ordinary, min {min(x[0] for x in slow) * 1e3:.1f}); "
            f"wall {med(quick, 1):.3f} vs {med(slow, 1):.3f} s (paired {paired(1) * 1e3:+.1f} ms); "
            f"CPU {med(quick, 2):.3f} vs {med(slow, 2):.3f} s (paired {paired(2) * 1e3:+.1f} ms)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None, help="where S2's store is cached (default: a new folder)")
    a = ap.parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="kbase-quick-exit-"))
    out.mkdir(parents=True, exist_ok=True)
    print(compile_kbase())
    db = build_in_child("run", "ensure_bulk_store", out=out, name="s2_store", n=2, kernels=S2_KERNELS,
                        iterations=S2_ITERATIONS)
    url = f"sqlite:///{db}"
    commands = {"list": ["list", "-n", "50", "--db", url], "show": ["show", "@1", "--db", url],
                "diff": ["diff", "@1", "@2", "--db", url, "--format", "json"],
                "gate": ["gate", "@1", "@2", "--db", url]}
    print(f"{a.rounds} interleaved rounds per command; load {loadavg()}")
    for name, args in commands.items():
        one(args, out, False)
        one(args, out, True)  # warm-up
        got: dict[bool, list[tuple[float, float, float]]] = {False: [], True: []}
        for r in range(a.rounds):
            for ordinary in ((False, True) if r % 2 == 0 else (True, False)):
                got[ordinary].append(one(args, out, ordinary))
        print(summary(name, got[False], got[True]))
    print(f"load {loadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
