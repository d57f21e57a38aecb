"""kbase performance benchmark: snapshot, diff/gate, store at scale, CLI start-up.

    python benchmarks/run.py [--quick] [--out DIR] [--only S1,S2,S3,S4]

Every command is timed as a fresh child process (what a CI job pays), wall time by
``time.perf_counter`` around ``os.wait4``, peak RSS from the same ``wait4`` rusage. Figures are
medians; ratios are taken pairwise within one run (floor first, then kbase, alternating). Large
generated inputs (exports, stores) are cached in ``--out`` and reused when their parameters and the
generator/schema versions match. See benchmarks/README.md for the scenarios and targets.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

GIB = 1 << 30
N_GPUS, ITERATIONS, DISTINCT = 8, 100, 2000
FLOOR_SQL = ("SELECT demangledName, count(*), sum(end-start) FROM CUPTI_ACTIVITY_KIND_KERNEL "
             "GROUP BY demangledName")
S3_KERNELS, S3_ITERATIONS, S3_POOL, S3_TEMPLATES = 500, 50, 600, 100


# --------------------------------------------------------------------------- running children


@dataclass
class Run:
    wall_s: float
    maxrss_bytes: int
    rc: int


def loadavg() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f}"


def kbase_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "kbase"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kbase.cli"]


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KBASE_DB", "KBASE_DEBUG")}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("COLUMNS", "200")
    return env


def run_child(cmd: list[str], cwd: Path, ok_codes=(0,), stdout_path: Path | None = None) -> Run:
    """Run one command as a fresh process; wall time and its own peak RSS (wait4 rusage)."""
    err_path = cwd / ".bench-stderr"
    with open(err_path, "wb") as err, open(stdout_path or os.devnull, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env=child_env())
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = rc = os.waitstatus_to_exitcode(status)
    if rc not in ok_codes:
        tail = err_path.read_text(errors="replace")[-2000:]
        raise SystemExit(f"benchmark: {' '.join(map(str, cmd))} exited {rc}\n{tail}")
    return Run(wall, usage.ru_maxrss * 1024, rc)  # ru_maxrss: KiB on Linux


def med(xs) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


# --------------------------------------------------------------------------- cached inputs


def _source_hash(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _fresh(sidecar: Path, want: dict) -> bool:
    try:
        return json.loads(sidecar.read_text()) == want
    except (OSError, ValueError):
        return False


def ensure_export(out: Path, n_kernels: int, seed: int, log) -> Path:
    """A generated 8-GPU, 100-iteration, 2,000-name export of about ``n_kernels`` kernels (cached)."""
    from kbase.synth.generate import ExportSpec, generate_export, scaled_kernel_mix

    per_iter = n_kernels // (N_GPUS * ITERATIONS)
    path = out / f"export_{n_kernels}_g{N_GPUS}_i{ITERATIONS}_k{DISTINCT}_s{seed}.sqlite"
    want = {"n_gpus": N_GPUS, "iterations": ITERATIONS, "distinct": DISTINCT, "per_iter": per_iter,
            "seed": seed,
            "generator": _source_hash(REPO / "kbase" / "generate.py", REPO / "kbase" / "generate_names.py")}
    side = path.with_suffix(".json")
    if path.exists() and _fresh(side, want):
        return path
    log(f"  generating {path.name} ...")
    t0 = time.perf_counter()
    truth = generate_export(path, ExportSpec(n_gpus=N_GPUS, iterations=ITERATIONS,
                                             kernels=scaled_kernel_mix(DISTINCT, per_iter), seed=seed),
                            overwrite=True)
    log(f"  generated {truth.n_kernels:,} kernels, {path.stat().st_size / 1e6:.0f} MB in "
        f"{time.perf_counter() - t0:.0f} s")
    side.write_text(json.dumps(want))
    return path


def _rm_store(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", ".migrate-lock"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def _rev(i: int) -> str:
    return hashlib.sha1(f"kbase-bench-{i}".encode()).hexdigest()


# --------------------------------------------------------------------------- results


@dataclass
class Row:
    scenario: str
    metric: str
    value: float
    unit: str
    runs: int = 0
    target: str = ""
    met: bool | None = None
    note: str = ""
    best: float | None = None  # the fastest run: on a shared machine, the least disturbed one


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    raw: dict = field(default_factory=dict)

    def add(self, *args, **kw) -> Row:
        r = Row(*args, **kw)
        self.rows.append(r)
        return r


def fmt_value(r: Row) -> str:
    if r.unit == "s":
        return f"{r.value:.3f} s"
    if r.unit == "x":
        return f"{r.value:.2f}x"
    if r.unit == "MiB":
        return f"{r.value:,.0f} MiB"
    if r.unit == "KiB":
        return f"{r.value:,.1f} KiB"
    if r.unit == "ms":
        return f"{r.value:,.1f} ms"
    return f"{r.value:g} {r.unit}"


def print_table(res: Results, header: str) -> str:
    lines = [header]
    w = [8, 50, 12, 10, 4, 11, 4]
    head = ["scenario", "metric", "median", "min", "runs", "target", "met"]
    lines.append("  ".join(h.ljust(x) for h, x in zip(head, w)) + "  note")
    lines.append("-" * (sum(w) + 2 * len(w) + 30))
    for r in res.rows:
        met = "" if r.met is None else ("yes" if r.met else "NO")
        best = fmt_value(Row(r.scenario, r.metric, r.best, r.unit)) if r.best is not None else ""
        cells = [r.scenario, r.metric, fmt_value(r), best, str(r.runs or ""), r.target, met]
        lines.append("  ".join(c.ljust(x) for c, x in zip(cells, w)) + ("  " + r.note if r.note else ""))
    text = "\n".join(lines)
    print(text, flush=True)
    return text


# --------------------------------------------------------------------------- S1 snapshot


def s1_snapshot(out: Path, sizes: list[int], res: Results, log) -> None:
    times: dict[int, float] = {}
    for n in sizes:
        path = ensure_export(out, n, seed=1, log=log)
        runs = 3 if n >= 5_000_000 else 5
        db = out / "s1_new_store.db"
        floor, snap, ratio = [], [], []
        log(f"S1 {n:,} kernels: {runs} pairs (sqlite3 floor, kbase snapshot into a new store)  "
            f"load {loadavg()}")
        for i in range(runs):
            f = run_child(["sqlite3", "-readonly", str(path), FLOOR_SQL], out)
            _rm_store(db)
            k = run_child([*kbase_cmd(), "snapshot", str(path), "--db", f"sqlite:///{db}", "--no-git",
                           "--rev", _rev(i), "--force", "-n", "1"], out)
            floor.append(f)
            snap.append(k)
            ratio.append(k.wall_s / f.wall_s)
            log(f"  run {i + 1}: floor {f.wall_s:.2f} s, snapshot {k.wall_s:.2f} s "
                f"({k.maxrss_bytes / GIB:.2f} GiB), ratio {ratio[-1]:.2f}x  load {loadavg()}")
        _rm_store(db)
        label = f"{n // 1_000_000}M"
        times[n] = med([r.wall_s for r in snap])
        rss = max(r.maxrss_bytes for r in snap)
        big = n >= 5_000_000
        res.add("S1", f"snapshot {label}: kbase wall", times[n], "s", runs, best=min(r.wall_s for r in snap))
        res.add("S1", f"snapshot {label}: sqlite3 floor wall", med([r.wall_s for r in floor]), "s", runs,
                best=min(r.wall_s for r in floor))
        res.add("S1", f"snapshot {label}: ratio to floor (pairwise)", med(ratio), "x", runs,
                "<= 2x" if big else "", (med(ratio) <= 2.0) if big else None, best=min(ratio))
        res.add("S1", f"snapshot {label}: peak RSS (max of runs)", rss / (1 << 20), "MiB", runs,
                "<= 1024 MiB", rss <= GIB)
        res.raw[f"S1_{label}"] = {"export": str(path), "export_bytes": path.stat().st_size,
                                  "floor": [r.__dict__ for r in floor],
                                  "snapshot": [r.__dict__ for r in snap], "ratio": ratio}
    if len(times) == 2:
        lo, hi = sorted(times)
        g = times[hi] / times[lo]
        res.add("S1", f"growth {lo // 1_000_000}M -> {hi // 1_000_000}M (time ratio)", g, "x", 0, "<= 11x",
                g <= 11)


# --------------------------------------------------------------------------- S2 diff / gate


def ensure_s2_store(out: Path, log) -> Path:
    from kbase.store.engine import HEAD_REVISION

    db = out / "s2_store.db"
    exports = [ensure_export(out, 1_000_000, seed=s, log=log) for s in (1, 2)]
    want = {"exports": [p.name for p in exports], "schema": HEAD_REVISION,
            "generator": json.loads(exports[0].with_suffix(".json").read_text())["generator"]}
    side = out / "s2_store.json"
    if db.exists() and _fresh(side, want):
        return db
    _rm_store(db)
    log("  storing two 1M-kernel snapshots for S2 ...")
    for i, p in enumerate(exports):
        run_child([*kbase_cmd(), "snapshot", str(p), "--db", f"sqlite:///{db}", "--no-git",
                   "--rev", _rev(100 + i), "-n", "1"], out)
    side.write_text(json.dumps(want))
    return db


def timed_pairs(out: Path, cmds: dict[str, list[str]], runs: int, ok_codes=(0,)) -> dict[str, list[Run]]:
    """One untimed warm-up each, then ``runs`` rounds, the commands alternating within a round."""
    for cmd in cmds.values():
        run_child(cmd, out, ok_codes)
    got: dict[str, list[Run]] = {k: [] for k in cmds}
    for _ in range(runs):
        for k, cmd in cmds.items():
            got[k].append(run_child(cmd, out, ok_codes))
    return got


def s2_diff(out: Path, res: Results, log, runs: int = 7) -> None:
    db = ensure_s2_store(out, log)
    url = f"sqlite:///{db}"
    log(f"S2 diff/gate @1 @2 (2,000 kernels x 99 iterations each): {runs} runs  load {loadavg()}")
    py = [sys.executable]
    got = timed_pairs(out, {
        "python -c pass": [*py, "-c", "pass"],
        "imports only": [*py, "-c", ("import kbase.cli, kbase.cli.diff, kbase.store, kbase.comparison.diff, "
                                     "kbase.comparison.resolve, kbase.render.diff, kbase.comparison.gate")],
        "diff": [*kbase_cmd(), "diff", "@1", "@2", "--db", url, "--format", "json"],
        "gate": [*kbase_cmd(), "gate", "@1", "@2", "--db", url],
    }, runs, ok_codes=(0, 1))
    for key, label in (("diff", "kbase diff @1 @2 --format json"), ("gate", "kbase gate @1 @2")):
        v = med([r.wall_s for r in got[key]])
        res.add("S2", label, v, "s", runs, "<= 0.6 s", v <= 0.6, best=min(r.wall_s for r in got[key]))
    for key, label in (("python -c pass", "  (ref) python -c pass"),
                       ("imports only", "  (ref) import kbase diff modules only")):
        res.add("S2", label, med([r.wall_s for r in got[key]]), "s", runs,
                best=min(r.wall_s for r in got[key]))
    res.raw["S2"] = {k: [r.__dict__ for r in v] for k, v in got.items()}


# --------------------------------------------------------------------------- S3 store at scale


def _s3_pool():
    import numpy as np

    from kbase.analysis import classify
    from kbase.synth.generate import scaled_kernel_mix

    specs = scaled_kernel_mix(S3_POOL, 2000, seed=7)
    names = [s.name for s in specs]
    info = {
        "name": names,
        "short_name": [classify.short_name(s.name, s.short_name) for s in specs],
        "family": [classify.family_key(n) for n in names],
        "category": [classify.category(n) for n in names],
        "tc": [classify.tensor_core_state(n)[0] for n in names],
    }
    return (info, np.array([s.mean_ns for s in specs], float),
            np.array([max(1, s.launches_per_iter) for s in specs]))


def synthetic_leaderboard(b: int, pool, n_gpus: int = 8):
    """Baseline ``b``: 500 of the pool's kernels (450 always, 50 rotating) over 50 iterations."""
    import numpy as np
    import pandas as pd

    from kbase.analysis.leaderboard import COLUMNS, Leaderboard, LeaderboardSummary

    info, means, launches = pool
    rng = np.random.default_rng([b, 0xB3])
    pick = np.r_[np.arange(450), 450 + (np.arange(50) + 13 * b) % (S3_POOL - 450)]
    keys = np.arange(2, 2 + S3_ITERATIONS)
    drift = 1.0 + 0.02 * np.sin(b / 300.0)
    cnt = np.repeat(launches[pick] * n_gpus, S3_ITERATIONS).reshape(len(pick), S3_ITERATIONS)
    mean = means[pick] * drift
    per = cnt * mean[:, None] * (1 + 0.01 * rng.standard_normal(cnt.shape))
    tot_it = np.rint(per).astype(np.int64)
    count, total = cnt.sum(axis=1), tot_it.sum(axis=1)
    avg = total / count
    kernel_ns = int(total.sum())
    window_ns = int(kernel_ns / n_gpus / 0.9)
    gpu_ns = window_ns * n_gpus
    units = S3_ITERATIONS * n_gpus
    share_w = total / gpu_ns
    t = pd.DataFrame({
        **{c: [info[c][i] for i in pick] for c in ("name", "short_name", "family", "category", "tc")},
        "gpus": n_gpus, "count": count.astype(np.int64), "total_ns": total, "avg_ns": avg, "median_ns": avg,
        "min_ns": np.rint(avg * 0.9).astype(np.int64), "max_ns": np.rint(avg * 1.1).astype(np.int64),
        "std_ns": avg * 0.02, "per_iter_ns": total / units, "count_per_iter": count / units,
        "share_window": share_w, "share_kernel": total / kernel_ns, "amdahl_ceiling": 1 / (1 - share_w),
        "fragmented": (count / units >= 500) & (avg < 10_000),
    }).sort_values(["total_ns", "name"], ascending=[False, True],
                   kind="stable").reset_index(drop=True)[COLUMNS]
    samples = pd.DataFrame({
        "name": np.repeat(np.asarray([info["name"][i] for i in pick], dtype=object), S3_ITERATIONS),
        "iteration": np.tile(keys, len(pick)), "count": cnt.ravel().astype(np.int64),
        "total_ns": tot_it.ravel(),
    })
    by_cat = t.groupby("category")["total_ns"].sum()
    comp, comm, mem = (int(by_cat.get(c, 0)) for c in ("compute", "communication", "memory"))
    summary = {
        "source": "train.sqlite", "format": "nsys-sqlite", "exporter": "nsys 2026.2.1.210 (schema 3.25.0)",
        "gpu_models": ["NVIDIA H100 80GB HBM3"], "gpus": n_gpus,
        "window": f"iterations 2..{1 + S3_ITERATIONS} ({S3_ITERATIONS} of {S3_ITERATIONS + 1}, "
                  "marker ProfilerStep#N, warm-up skipped: 1)",
        "aligned": True, "mode": "iterations", "marker": "ProfilerStep#N", "iterations": S3_ITERATIONS,
        "iteration_keys": keys.tolist(), "warmup_skipped": 1, "window_start_ns": 1_500_000_000,
        "window_end_ns": 1_500_000_000 + window_ns, "window_ns": window_ns, "window_gpu_ns": gpu_ns,
        "total_kernel_ns": kernel_ns, "kernel_ns_per_iter": kernel_ns / units, "compute_ns": comp,
        "communication_ns": comm, "memory_ns": mem, "busy_share": kernel_ns / gpu_ns,
        "compute_share": comp / gpu_ns, "communication_share": comm / gpu_ns, "memory_share": mem / gpu_ns,
        "share_denominator": f"window {window_ns / 1e9:.6f} s x {n_gpus} GPU(s) = {gpu_ns / 1e9:.6f} GPU-s",
        "top1_share_kernel": float(t["share_kernel"].iloc[0]),
        "top5_share_kernel": float(t["share_kernel"].head(5).sum()),
        "shape": ["balanced"], "kernels": len(t), "launches": int(count.sum()), "unattributed_no_launch": 0,
        "outside_iterations": 0, "step_wall_ns": None,
    }
    return Leaderboard(table=t, summary=LeaderboardSummary(**summary), samples=samples, notes=[])


def ensure_s3_store(out: Path, n: int, log) -> Path:
    from datetime import UTC, datetime, timedelta

    from kbase.analysis.window import WindowSpec
    from kbase.gitrepo import CommitInfo
    from kbase.readers.source import SourceInfo
    from kbase.store import open_store, queries
    from kbase.store.engine import HEAD_REVISION

    db = out / f"s3_store_{n}.db"
    want = {"baselines": n, "kernels": S3_KERNELS, "iterations": S3_ITERATIONS, "schema": HEAD_REVISION,
            "templates": S3_TEMPLATES, "v": 1}
    side = out / f"s3_store_{n}.json"
    if db.exists() and _fresh(side, want):
        return db
    _rm_store(db)
    log(f"  building the S3 store: {n:,} baselines x {S3_KERNELS} kernels x {S3_ITERATIONS} iterations "
        "(save_leaderboard, one engine) ...")
    opened = open_store(f"sqlite:///{db}")
    engine, url = opened.engine, opened.url
    # Build speed only (the rows are what save_leaderboard writes either way): no fsync at WAL
    # checkpoints, which halved the time per save on this machine's disk.
    from sqlalchemy import event

    event.listen(engine, "connect", lambda dbapi_conn, _rec: dbapi_conn.execute("PRAGMA synchronous = OFF"))
    engine.dispose()
    pool = _s3_pool()
    wkey = WindowSpec().key()
    t0 = time.perf_counter()
    day0 = datetime(2026, 1, 1, tzinfo=UTC)
    try:
        templates: dict[int, object] = {}
        for b in range(n):
            # S3_TEMPLATES distinct leaderboards, cycled: building each costs about as much as saving it
            t = b % S3_TEMPLATES
            lb = templates.get(t) or templates.setdefault(t, synthetic_leaderboard(t, pool))
            commit = CommitInfo(hash=_rev(10_000 + b), date=day0 + timedelta(hours=b), branch="main",
                                detached=False, dirty=False)
            src = SourceInfo(name="train.sqlite", sha256=hashlib.sha256(str(b).encode()).hexdigest(),
                                   size=140_000_000, format="nsys-sqlite")
            queries.save_leaderboard(engine, lb, workload="train-8gpu", commit=commit, source=src,
                                   window_spec=wkey, tags=["nightly"], url=url)
            if (b + 1) % 1000 == 0:
                el = time.perf_counter() - t0
                log(f"    {b + 1:,} saved, {el:.0f} s ({el / (b + 1) * 1e3:.1f} ms each)  load {loadavg()}")
    finally:
        engine.dispose()
    build_s = time.perf_counter() - t0
    log(f"  built in {build_s:.0f} s ({build_s / n * 1e3:.1f} ms per baseline)")
    side.write_text(json.dumps(want))
    (out / f"s3_store_{n}.build.json").write_text(json.dumps({"build_s": build_s}))
    return db


def s3_store(out: Path, n: int, res: Results, log, runs: int = 5) -> None:
    db = ensure_s3_store(out, n, log)
    url = f"sqlite:///{db}"
    size = sum(Path(str(db) + s).stat().st_size for s in ("", "-wal") if Path(str(db) + s).exists())
    i, j = n // 2, n // 2 + 1
    hot = _s3_pool()[0]["name"][0]  # in every baseline
    log(f"S3 store of {n:,} baselines: {runs} runs  load {loadavg()}")
    got = timed_pairs(out, {
        "list": [*kbase_cmd(), "list", "--db", url, "-n", "50"],
        "diff": [*kbase_cmd(), "diff", f"@{i}", f"@{j}", "--db", url],
        "history": [*kbase_cmd(), "history", hot, "--db", url, "--format", "json"],
    }, runs, ok_codes=(0,))
    res.add("S3", f"store size ({n:,} baselines)", size / (1 << 20), "MiB", 0, note=db.name)
    res.add("S3", "store size per baseline", size / n / 1024, "KiB", 0)
    build = out / f"s3_store_{n}.build.json"
    if build.exists():
        res.add("S3", "build: save_leaderboard per baseline",
                json.loads(build.read_text())["build_s"] / n * 1e3, "ms", 0,
                note="when the store was built (cached after)")
    for key, label in (("list", "kbase list -n 50"), ("diff", f"kbase diff @{i} @{j} (500 kernels)"),
                       ("history", f"kbase history NAME --format json ({n:,} rows)")):
        v = med([r.wall_s for r in got[key]])
        res.add("S3", label, v, "s", runs, "<= 1 s", v <= 1.0, best=min(r.wall_s for r in got[key]))
    res.raw[f"S3_{n}"] = {"db": str(db), "bytes": size,
                          **{k: [r.__dict__ for r in v] for k, v in got.items()}}


# --------------------------------------------------------------------------- S4 --help


def s4_help(out: Path, res: Results, log, runs: int = 9) -> None:
    log(f"S4 kbase --help: {runs} runs  load {loadavg()}")
    got = timed_pairs(out, {"help": [*kbase_cmd(), "--help"]}, runs)
    v = med([r.wall_s for r in got["help"]])
    res.add("S4", "kbase --help", v, "s", runs, "<= 0.3 s", v <= 0.3, best=min(r.wall_s for r in got["help"]))
    res.raw["S4"] = [r.__dict__ for r in got["help"]]


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1M only for S1, 500 baselines for S3")
    ap.add_argument("--out", type=Path, help="results.json and cached inputs (default: a new temp dir)")
    ap.add_argument("--only", default="S1,S2,S3,S4", help="comma-separated scenarios to run")
    args = ap.parse_args(argv)
    if shutil.which("sqlite3") is None:
        print("benchmark: the sqlite3 command-line shell is needed for the S1 floor", file=sys.stderr)
        return 2
    out = (args.out or Path(tempfile.mkdtemp(prefix="kbase-bench-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    only = {s.strip().upper() for s in args.only.split(",")}
    t_start = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t_start:6.0f} s] {msg}", file=sys.stderr, flush=True)

    load_start = loadavg()
    log(f"out: {out}  cores: {os.cpu_count()}  load average (1/5/15 min): {load_start}")
    res = Results()
    if "S1" in only:
        s1_snapshot(out, [1_000_000] if args.quick else [1_000_000, 10_000_000], res, log)
    if "S2" in only:
        s2_diff(out, res, log)
    if "S3" in only:
        s3_store(out, 500 if args.quick else 10_000, res, log)
    if "S4" in only:
        s4_help(out, res, log)
    total = time.perf_counter() - t_start
    header = (f"kbase benchmark ({'quick' if args.quick else 'full'}), {os.cpu_count()} cores, load average "
              f"{load_start} at start, {loadavg()} at end; {total:.0f} s in all")
    text = print_table(res, header)
    (out / "results.json").write_text(json.dumps({
        "mode": "quick" if args.quick else "full", "load_start": load_start, "load_end": loadavg(),
        "cores": os.cpu_count(), "total_s": total, "python": sys.version.split()[0],
        "rows": [r.__dict__ for r in res.rows], "raw": res.raw, "table": text,
    }, indent=2))
    log(f"wrote {out / 'results.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
