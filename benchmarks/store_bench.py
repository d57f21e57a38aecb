"""S7 and S8 (issue 30, items 1 and 2): what a stored baseline costs on disk, and the history reads over
thousands of baselines.

S7 bytes per baseline: stores of ``S7_BASELINES`` baselines (``write_bulk_history``: every baseline its own
samples and sketches) of 500 kernels x 50 iterations and of 2,000 kernels x 50 and x 99 (S2's shape),
and snapshots of generated 500-kernel exports (``kbase snapshot``: a real leaderboard's noise). The figure
is the marginal cost of one more baseline: (size after N - size after the first) / (N - 1), so the kernel
names (stored once) do not count; SQLite's file after a checkpoint, PostgreSQL's tables with their TOAST
and indexes (``pg_total_relation_size``, after VACUUM) when a server is at hand (``KBASE_TEST_PG_URL``, else
a throwaway one from ``pg_config --bindir``, as tests/pg.py starts it). The SQLite rows break it down:
each blob of the kernel table, the baseline row with its indexes, and page overhead.

S8 history reads: ``kbase steps --last N`` over all N = 5,000 and 50,000 baselines of 500 kernels (and
``kbase history NAME --format json``, N rows), wall and peak RSS, against ``python -c pass`` in the same
rounds. The 50,000-baseline store reuses 64 samples/sketches blobs (``write_bulk_history(blob_pool=64)``:
encoding them is ~30 ms a baseline, and neither command decodes them); its levels and boards are each
baseline's own.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from bench_common import (
    REPO,
    Results,
    build_in_child,
    fresh,
    kbase_cmd,
    loadavg,
    med,
    rm_store,
    source_hash,
    timed_pairs,
)

# the store's encoder: a cached store or size is stale when it changes
ENCODER = [REPO / "kbase" / "store" / "codec" / f for f in (
    "packed.py", "packing.py", "kernel_blobs.py", "kernel_format.py", "id_lists.py", "kernel_columns.py",
    "sample_blobs.py", "op_blobs.py")]
BLOBS = ("levels", "board", "samples", "sketches", "ops", "kernel_ids", "op_ids")  # (the ids: beside the blobs)

KIB = 1024
S7_BASELINES = 20
S7_SHAPES = ((500, 50), (2000, 50), (2000, 99))
SIZE_KIB_PER_500 = 64.0  # target: per 500-kernel x 50-iteration baseline, in proportion for more kernels
STEPS = {5_000: (1.0, 250.0), 50_000: (5.0, None)}  # baselines -> (wall s, peak RSS MiB) targets
POOL_FROM = 50_000  # stores this large reuse a pool of samples/sketches blobs (see the module doc)


# --------------------------------------------------------------------------- S7 bytes per baseline


def _checkpointed_size(db: Path) -> int:
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    return db.stat().st_size


def _objects(db: Path) -> dict[str, int]:
    """Bytes of every table and index (SQLite's dbstat), and the free pages as "(free)"."""
    conn = sqlite3.connect(db)
    try:
        out = dict(conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        out["(free)"] = conn.execute("PRAGMA freelist_count").fetchone()[0] * page
    finally:
        conn.close()
    return out


def _blob_bytes(db: Path) -> dict[str, float]:
    conn = sqlite3.connect(db)
    try:
        row = conn.execute("SELECT count(*), sum(length(levels)), sum(length(board)), sum(length(samples)), "
                           "sum(length(sketches)), sum(length(ops)), sum(length(kernel_ids)), sum(length(op_ids)) "
                           "FROM baseline_kernels").fetchone()
    finally:
        conn.close()
    return {k: (v or 0) / row[0] for k, v in zip(BLOBS, row[1:])}


def ensure_size_store(out: Path, kernels: int, iterations: int, n: int, url: str | None, log) -> Path:
    """A store of ``n`` bulk baselines; its size after the first and after all (a JSON sidecar, cached).
    ``url``: a PostgreSQL database to build it in instead (not cached)."""
    from kbase.store import open_store
    from kbase.store.engine import head_revision
    from kbase.synth.history import write_bulk_history

    side = out / f"s7_{kernels}x{iterations}_{'pg' if url else 'sqlite'}.json"
    want = {"kernels": kernels, "iterations": iterations, "n": n, "schema": head_revision(), "v": 1,
            "encoder": source_hash(*ENCODER)}
    if url is None and fresh(side, want) and "sizes" in json.loads(side.read_text()):
        return side
    db = out / f"s7_{kernels}x{iterations}.db"
    rm_store(db)
    store = open_store(url or f"sqlite:///{db}")
    try:
        write_bulk_history(store.engine, 1, workload="size", n_kernels=kernels, iterations=iterations)
        first = _pg_size(store.engine) if url else _checkpointed_size(db)
        before = {} if url else _objects(db)
        write_bulk_history(store.engine, n - 1, workload="size", n_kernels=kernels, iterations=iterations, seed=1)
        last = _pg_size(store.engine) if url else _checkpointed_size(db)
    finally:
        store.close()
    sizes: dict = {"first": first, "last": last}
    if not url:
        after = _objects(db)
        sizes |= {"objects": {k: after.get(k, 0) - before.get(k, 0) for k in after}, "blobs": _blob_bytes(db)}
        rm_store(db)
    side.write_text(json.dumps({**want, "sizes": sizes}))
    log(f"  S7 {kernels} kernels x {iterations} iterations ({'PostgreSQL' if url else 'SQLite'}): "
        f"{(last - first) / (n - 1) / KIB:.1f} KiB per baseline")
    return side


def _pg_size(engine) -> int:
    from sqlalchemy import text

    with engine.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM")
    with engine.connect() as conn:
        return int(conn.execute(text(
            "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = current_schema() AND c.relkind = 'r'")).scalar_one())


def ensure_snapshot_sizes(out: Path, n: int, log, url: str | None = None) -> Path:
    """Marginal bytes per baseline of ``kbase snapshot`` of ``n`` generated exports of 500 kernels x 50
    iterations on 4 GPUs (cached); ``url``: into that PostgreSQL database instead (not cached)."""
    from kbase.store.engine import head_revision
    from kbase.synth.generate import ExportSpec, generate_export
    from kbase.synth.names import scaled_kernel_mix

    side = out / f"s7_snapshots{'_pg' if url else ''}.json"
    want = {"n": n, "schema": head_revision(), "v": 1, "encoder": source_hash(*ENCODER)}
    if url is None and fresh(side, want) and "sizes" in json.loads(side.read_text()):
        return side
    db = out / "s7_snapshots.db"
    rm_store(db)
    target = url or f"sqlite:///{db}"
    engine = None
    if url:
        from sqlalchemy import create_engine

        engine = create_engine(url)
    sizes = []
    for seed in range(n):
        export = out / "s7_export.sqlite"
        generate_export(export, ExportSpec(n_gpus=4, iterations=51, kernels=scaled_kernel_mix(500, 4000), seed=seed),
                        overwrite=True)
        subprocess.run([*kbase_cmd(), "snapshot", str(export), "--db", target, "--no-git", "--rev",
                        f"{seed + 1:040x}", "--name", "gen", "-q"], check=True, capture_output=True)
        sizes.append(_pg_size(engine) if engine is not None else _checkpointed_size(db))
    blobs = {} if engine is not None else _blob_bytes(db)
    if engine is not None:
        engine.dispose()
    export.unlink(missing_ok=True)
    rm_store(db)
    side.write_text(json.dumps({**want, "sizes": {"first": sizes[0], "last": sizes[-1], "blobs": blobs}}))
    return side


def _pg_server(log) -> tuple[str | None, object | None]:
    """A PostgreSQL server URL for S7 (``KBASE_TEST_PG_URL``, else a throwaway server) and the server to stop."""
    from pg_bench import _pg_helpers

    pg = _pg_helpers()  # the tests' throwaway-server helper

    env = os.environ.get("KBASE_TEST_PG_URL")
    try:
        if env:
            url = "postgresql+psycopg2://" + env.split("://", 1)[1]
            pg.wait_ready(url)
            return url, None
        server = pg.PgServer()
        server.start()
        return server.url, server
    except Exception as exc:  # noqa: BLE001 - no server here: SQLite figures only
        log(f"  S7: no PostgreSQL server ({type(exc).__name__}: {exc}); SQLite only")
        return None, None


def s7_store_size(out: Path, res: Results, log) -> None:
    log(f"S7 bytes per stored baseline ({S7_BASELINES} baselines per shape)  load {loadavg()}")
    for kernels, iterations in S7_SHAPES:
        got = json.loads(build_in_child("store_bench", "ensure_size_store", out=out, kernels=kernels,
                                        iterations=iterations, n=S7_BASELINES, url=None).read_text())["sizes"]
        per = (got["last"] - got["first"]) / (S7_BASELINES - 1)
        target = SIZE_KIB_PER_500 * kernels / 500 if iterations == 50 else None  # the shape
        old = {(500, 50): "704 KiB", (2000, 99): "2,797 KiB"}.get((kernels, iterations))
        res.add("S7", f"bytes per baseline, {kernels:,} kernels x {iterations} iterations (SQLite)", per / KIB, "KiB",
                0, f"<= {target:.0f} KiB" if target else "", per <= target * KIB if target else None,
                note=f"0008 stored {old} (0008, measured)" if old else "")
        blobs, objects = got["blobs"], got["objects"]
        n = S7_BASELINES - 1
        table = objects.get("baseline_kernels", 0) / n
        row = sum(v for k, v in objects.items() if "baseline" in k and "kernels" not in k) / n
        res.add("S7", "  kernel table: levels / board / samples / sketches / ops / kernel ids / op ids",
                sum(blobs.values()) / KIB, "KiB",
                0, note=" / ".join(f"{blobs.get(k, 0) / kernels:.1f}" for k in BLOBS) + " bytes per kernel")
        res.add("S7", "  page overhead of the kernel table; baseline row and its indexes",
                (table - sum(blobs.values())) / KIB, "KiB", 0, note=f"baseline row {row / KIB:.1f} KiB")
    snap = json.loads(build_in_child("store_bench", "ensure_snapshot_sizes", out=out, n=3).read_text())["sizes"]
    per = (snap["last"] - snap["first"]) / 2
    res.add("S7", "bytes per baseline, kbase snapshot of a generated 500-kernel x 51-iteration export", per / KIB,
            "KiB", 0, f"<= {SIZE_KIB_PER_500:.0f} KiB", per <= SIZE_KIB_PER_500 * KIB,
            note="blobs " + " / ".join(f"{snap['blobs'].get(k, 0) / 500:.1f}" for k in BLOBS) + " B/kernel")
    admin, server = _pg_server(log)
    if admin is None:
        return
    from pg_bench import _pg_helpers

    pg = _pg_helpers()

    try:
        for kernels, iterations in S7_SHAPES[:2]:
            url = pg.create_database(admin)
            try:  # in a child, as every input here: the benchmark's own peak RSS would become its children's
                side = build_in_child("store_bench", "ensure_size_store", out=out, kernels=kernels,
                                      iterations=iterations, n=S7_BASELINES, url=url)
            finally:
                pg.drop_database(admin, url)
            got = json.loads(side.read_text())["sizes"]
            per = (got["last"] - got["first"]) / (S7_BASELINES - 1)
            target = SIZE_KIB_PER_500 * kernels / 500
            res.add("S7", f"bytes per baseline, {kernels:,} kernels x {iterations} iterations (PostgreSQL)",
                    per / KIB, "KiB", 0, f"<= {target:.0f} KiB", per <= target * KIB,
                    note="0008 stored 648 KiB at 500 x 50 (0008, measured)" if kernels == 500 else "")
        url = pg.create_database(admin)
        try:
            snap_pg = json.loads(build_in_child("store_bench", "ensure_snapshot_sizes", out=out, n=3,
                                                url=url).read_text())["sizes"]
        finally:
            pg.drop_database(admin, url)
        per = (snap_pg["last"] - snap_pg["first"]) / 2
        res.add("S7", "bytes per baseline, kbase snapshot of a generated 500-kernel x 51-iteration export "
                "(PostgreSQL)", per / KIB, "KiB", 0, f"<= {SIZE_KIB_PER_500:.0f} KiB", per <= SIZE_KIB_PER_500 * KIB)
    finally:
        if server is not None:
            server.stop()  # type: ignore[attr-defined]


# --------------------------------------------------------------------------- S8 history reads


def s8_steps(out: Path, res: Results, log, runs: int = 3, sizes: tuple[int, ...] = (5_000, 50_000)) -> None:
    from kbase.synth.history import _bulk_mix

    norepo = out / "s8_no_repository"  # creation order: no git repository to walk
    norepo.mkdir(exist_ok=True)
    hot = _bulk_mix(1)[0].name
    for n in sizes:
        t0 = time.perf_counter()
        db = build_in_child("run", "ensure_bulk_store", out=out, name=f"s8_store_{n}", n=n, kernels=500,
                            iterations=50, blob_pool=64 if n >= POOL_FROM else 0)
        log(f"S8 store of {n:,} baselines ready ({time.perf_counter() - t0:.0f} s): {runs} rounds  load {loadavg()}")
        url = f"sqlite:///{db}"
        got = timed_pairs(out, {
            "python -c pass": [sys.executable, "-c", "pass"],
            "steps": [*kbase_cmd(), "steps", "--name", "bulk", "--last", str(n), "--db", url, "--repo", str(norepo),
                      "--format", "json"],
            "history": [*kbase_cmd(), "history", hot, "--db", url, "--format", "json"],
        }, runs)
        ref = med([r.wall_s for r in got["python -c pass"]])
        wall_t, rss_t = STEPS[n]
        wall = med([r.wall_s for r in got["steps"]])
        rss = max(r.maxrss_bytes for r in got["steps"]) / (1 << 20)
        res.add("S8", f"kbase steps --last {n:,} ({n:,} baselines x 500 kernels): wall", wall, "s", runs,
                f"<= {wall_t} s", wall <= wall_t, best=min(r.wall_s for r in got["steps"]),
                note=f"python -c pass {ref:.3f} s; 0008: 12.6 s, 1,059 MiB at 5,000 (0008, measured)")
        res.add("S8", "  CPU (user + system)", med([r.cpu_s for r in got["steps"]]), "s", runs,
                best=min(r.cpu_s for r in got["steps"]),
                note="other processes cannot inflate it: about an idle machine's wall time")
        res.add("S8", "  peak RSS (max of runs)", rss, "MiB", runs, f"<= {rss_t:.0f} MiB" if rss_t else "",
                rss <= rss_t if rss_t else None)
        hist = med([r.wall_s for r in got["history"]])
        res.add("S8", f"kbase history NAME --format json ({n:,} rows)", hist, "s", runs,
                best=min(r.wall_s for r in got["history"]), note=f"CPU {med([r.cpu_s for r in got['history']]):.3f} s; "
                f"peak RSS {max(r.maxrss_bytes for r in got['history']) / (1 << 20):.0f} MiB")
        res.raw[f"S8_{n}"] = {"db": str(db), **{k: [r.__dict__ for r in v] for k, v in got.items()}}
