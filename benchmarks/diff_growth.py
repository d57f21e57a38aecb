"""S10: growth of ``kbase diff`` / ``gate`` with the number of distinct kernels (issue: linear in every input).

Two stored baselines of 2,000, 20,000 and 200,000 distinct kernels (``write_bulk_history``: a fifth of the
kernel count as ops, a fifth of the kernels split between two or three ops, so the op view, swap grouping and
the op blobs' remainders are all exercised), 10 iterations each. Each size's diff and gate run as fresh
processes; the ratio of CPU time (user + system: what a shared machine's load does not inflate) between
consecutive sizes is printed beside the 10x growth of the input. Linear work gives ~10x (less while the fixed
start-up cost still counts); the target allows 13x per 10x of kernels.

From ``ONE_ROUND`` kernels on, each command runs once, without a warm-up: a 200,000-kernel diff is about a
CPU-minute (its JSON ~330 MB), and its store was read or written just before (its pages are cached). Writing
that store takes ~3 minutes (cached in ``--out`` like every input).
"""

from __future__ import annotations

from pathlib import Path

from bench_common import Results, build_in_child, kbase_cmd, loadavg, med, timed_pairs

GROWTH_SIZES = (2_000, 20_000, 200_000)
GROWTH_ITERATIONS = 10
MAX_GROWTH = 13.0  # per 10x kernels: linear plus headroom for caches and allocation
ONE_ROUND = 100_000  # kernels from which each command runs once (see the module)


def s10_diff_growth(out: Path, res: Results, log, runs: int = 3, sizes: tuple[int, ...] = GROWTH_SIZES) -> None:
    previous: dict[str, tuple[int, float]] = {}
    for n in sizes:
        db = build_in_child("run", "ensure_bulk_store", out=out, name=f"s10_store_{n}", n=2, kernels=n,
                            iterations=GROWTH_ITERATIONS)
        url = f"sqlite:///{db}"
        rounds = 1 if n >= ONE_ROUND else runs
        log(f"S10 diff/gate @1 @2 at {n:,} kernels x {GROWTH_ITERATIONS} iterations: {rounds} rounds  load {loadavg()}")
        got = timed_pairs(out, {
            "diff": [*kbase_cmd(), "diff", "@1", "@2", "--db", url, "--format", "json"],
            "gate": [*kbase_cmd(), "gate", "@1", "@2", "--db", url],
        }, rounds, ok_codes=(0, 1), warm_up=n < ONE_ROUND)
        for key in ("diff", "gate"):
            wall = med([r.wall_s for r in got[key]])
            cpu = med([r.cpu_s for r in got[key]])
            res.add("S10", f"kbase {key} @1 @2, {n:,} kernels", wall, "s", rounds,
                    best=min(r.wall_s for r in got[key]),
                    note=f"CPU {cpu:.2f} s; peak RSS {max(r.maxrss_bytes for r in got[key]) / (1 << 20):.0f} MiB")
            if key in previous:
                m, before = previous[key]
                growth = cpu / before
                res.add("S10", f"  {key} growth in CPU {m:,} -> {n:,} kernels ({n / m:.0f}x)", growth, "x", rounds,
                        f"<= {MAX_GROWTH * n / m / 10:.0f}x", growth <= MAX_GROWTH * n / m / 10)
            previous[key] = (n, cpu)
        res.raw[f"S10_{n}"] = {k: [r.__dict__ for r in v] for k, v in got.items()}
