"""Two checkouts of kbase against each other, interleaved: the CPU seconds (user + system, of the process and
its threads) of the same commands, old and new alternating in fresh processes, so that a load spike or a slower
minute of a shared VM hits both sides of a pair. Prints each command's median CPU per side and the median of the
per-pair ratios. docs/performance.md's "kbase against itself" table is its output.

    git worktree add /tmp/kbase-old <commit>
    python benchmarks/ab_commits.py --old /tmp/kbase-old --new . --out BENCH_DIR [--pairs 7] [--only S6,S3]

BENCH_DIR is a ``benchmarks/run.py --out`` folder that already holds the inputs (the 1M export, the S2 and S3
stores): nothing is generated here. Each side runs with its checkout first on ``PYTHONPATH`` (compile both
first: ``python -m compileall -q OLD/kbase NEW/kbase``) and one reader thread (``KBASE_READ_THREADS=1``).
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

from bench_common import kbase_cmd


def cases(out: Path, scratch: Path) -> dict[str, list[str]]:
    export = out / "export_1000000_g8_i100_k2000_s1.sqlite"
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kbase.synth.history import _bulk_mix

    hot = _bulk_mix(1)[0].name  # in every baseline of the S3 store
    kb = kbase_cmd()
    return {
        "S1": [*kb, "snapshot", str(export), "--db", f"sqlite:///{scratch / 'ab.db'}", "--no-git", "--rev", "a" * 40,
               "--force", "-n", "1"],
        "S6": [*kb, "top", str(export), "--no-store"],
        "S2 diff": [*kb, "diff", "@1", "@2", "--db", f"sqlite:///{out / 's2_store.db'}", "-f", "json"],
        "S2 gate": [*kb, "gate", "@1", "@2", "--db", f"sqlite:///{out / 's2_store.db'}"],
        "S3": [*kb, "history", hot, "--db", f"sqlite:///{out / 's3_store_10000.db'}", "--format", "json"],
    }


def run(cmd: list[str], tree: Path, scratch: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, exit status) of one fresh process of ``cmd`` with ``tree`` first on the path."""
    for f in scratch.glob("ab.db*"):
        f.unlink()
    env = dict(os.environ, PYTHONPATH=str(tree), KBASE_READ_THREADS="1")
    wall = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=scratch)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - wall, usage.ru_utime + usage.ru_stime, status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", type=Path, required=True, help="the checkout to compare against")
    ap.add_argument("--new", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True, help="a benchmarks/run.py --out folder with the inputs")
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--only", default="", help="comma-separated case names (S1, S6, S2 diff, S2 gate, S3)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbase-ab-") as tmp:
        scratch = Path(tmp)
        todo = cases(args.out.resolve(), scratch)
        chosen = [c for c in todo if not args.only or any(c.startswith(o.strip()) for o in args.only.split(","))]
        trees = {"old": args.old.resolve(), "new": args.new.resolve()}
        print(f"load average {os.getloadavg()[0]:.2f}; {args.pairs} pairs per command, old and new alternating")
        for name in chosen:
            got: dict[str, list[tuple[float, float, int]]] = {"old": [], "new": []}
            for i in range(args.pairs):
                for side in ("old", "new") if i % 2 == 0 else ("new", "old"):
                    got[side].append(run(todo[name], trees[side], scratch))
            if any(r[2] for r in got["old"] + got["new"]):
                print(f"{name}: a run failed (exit status {sorted({r[2] for r in got['old'] + got['new']})})")
                return 1
            old, new = ([r[1] for r in got[s]] for s in ("old", "new"))
            ratio = statistics.median(b / a for a, b in zip(old, new))
            print(f"{name:8s} CPU old {statistics.median(old):.3f} s  new {statistics.median(new):.3f} s  "
                  f"new/old {ratio:.2f}x (median of {args.pairs} pairs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
