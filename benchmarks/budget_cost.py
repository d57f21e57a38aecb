"""What the GPU time budget costs a snapshot: ``kbase snapshot`` of the same export with and without the budget
(A/B in fresh processes, the budget's own function swapped for an empty one in B), and the budget's own time,
measured in the same run (issue: at most 10% of a 10M-launch snapshot).

    .venv/bin/python benchmarks/budget_cost.py [--with-10m] [--runs 3]

Per export (the benchmarks' generated 8-GPU, 100-iteration exports, cached under bench-out/): the median wall
time of ``kbase snapshot`` in a fresh process (a new store each run), and, in another fresh process, the
budget's own time on the same window (read -> window -> ``analysis.leaderboard.budget_of``, timed around the
budget call alone). Prints both and their ratio.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_common import REPO, child_env, ensure_export, kbase_cmd, med, rm_store, run_child

BUDGET_TIMER = """
import json, sys, time
import kbase
from kbase.analysis.classify import kinds_of
from kbase.analysis.leaderboard import budget_of
s = kbase.Settings.load()
p = kbase.read(sys.argv[1], s)
w = kbase.window(p, s)
kinds = kinds_of(p.columns.names.tolist(), p.short_names)
t0 = time.perf_counter(); c0 = time.process_time()
b = budget_of(w, kinds)
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0,
                  "launches": int(len(p.columns)), "gpus": len(b.gpus)}))
"""


# B: the same command with ``budget_of`` returning an empty budget (what the snapshot costs without the sweep)
WITHOUT_BUDGET = """
import sys
import kbase.analysis.leaderboard as lb
from kbase.analysis.budget_blocks import Blocks, Budget

def empty(window, kinds, whole=False):
    return Budget(unit="window", window="", n_iterations=0, gpus=[], total=Blocks(), iterations=[],
                  gaps={"by_cause": {}, "by_size": {}}, largest_gaps=[])

lb.budget_of = empty
sys.argv = ["kbase", *sys.argv[1:]]
from kbase.cli.__main__ import run
run()
"""


def budget_time(export: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", BUDGET_TIMER, str(export)], capture_output=True, text=True,
                         env=child_env(), check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure(export: Path, runs: int, log) -> dict:
    snaps = []
    bare = []
    budgets = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(runs):
            args = ["snapshot", str(export), "--no-git", "--rev", f"{i + 1:040x}", "--quiet"]
            db = Path(tmp) / f"s{i}.db"
            snaps.append(run_child([*kbase_cmd(), *args, "--db", f"sqlite:///{db}"], Path(tmp)))
            rm_store(db)
            bare.append(run_child([sys.executable, "-c", WITHOUT_BUDGET, *args, "--db", f"sqlite:///{db}"], Path(tmp)))
            rm_store(db)
            budgets.append(budget_time(export))
    snap_wall = med([r.wall_s for r in snaps])
    snap_cpu = med([r.cpu_s for r in snaps])
    b_wall = med([b["wall"] for b in budgets])
    b_cpu = med([b["cpu"] for b in budgets])
    log(f"{export.name}: {budgets[0]['launches']:,} launches, {budgets[0]['gpus']} GPUs")
    bare_wall, bare_cpu = med([r.wall_s for r in bare]), med([r.cpu_s for r in bare])
    log(f"  snapshot {snap_wall:.2f} s wall, {snap_cpu:.2f} s CPU (median of {runs}); without the budget "
        f"{bare_wall:.2f} s wall, {bare_cpu:.2f} s CPU: the budget adds {snap_wall / bare_wall - 1:+.1%} wall, "
        f"{snap_cpu / bare_cpu - 1:+.1%} CPU")
    log(f"  budget   {b_wall:.3f} s wall, {b_cpu:.3f} s CPU = {b_wall / snap_wall:.1%} of the snapshot's wall, "
        f"{b_cpu / snap_cpu:.1%} of its CPU (target <= 10%)")
    return {"snapshot_wall": snap_wall, "budget_wall": b_wall, "ratio": b_wall / snap_wall}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--with-10m", action="store_true", help="also the 10M-launch export (minutes to generate)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", type=Path, default=REPO / "bench-out")
    args = ap.parse_args(argv)
    args.out.mkdir(exist_ok=True)
    sizes = [1_000_000] + ([10_000_000] if args.with_10m else [])
    for n in sizes:
        measure(ensure_export(args.out, n, 0, print), args.runs, print)
    return 0


if __name__ == "__main__":
    sys.exit(main())
