"""S9: PostgreSQL against SQLite, command by command, on equal stores — list, show, history, diff, gate and
steps on a store of N baselines x 500 kernels x 50 iterations written alike into both (``write_bulk_history``,
same seed), the server on loopback — and a snapshot of the 1M export into each (a write: its time reported).

The server: ``KBASE_BENCH_PG_URL`` (a ``postgresql://`` URL whose user may create databases), else a
throwaway PostgreSQL started here by the tests' helper (``tests/pg.py``: ``pg_config --bindir``, run as the
``postgres`` user when root), on 127.0.0.1, stopped at the end.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bench_common import (
    REPO,
    Results,
    build_in_child,
    child_env,
    kbase_cmd,
    loadavg,
    med,
    rev_of,
    rm_store,
    run_child,
    timed_pairs,
)

PG_X = 1.5  # each read command on PostgreSQL against the same command on an equal SQLite store
KERNELS, ITERATIONS = 500, 50


def _pg_helpers():
    """The tests' throwaway-server helper (tests/pg.py; tests/helpers/pg.py in a later layout)."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    try:
        from tests.helpers import pg  # type: ignore[import-not-found]
    except ImportError:
        from tests import pg  # type: ignore[no-redef]
    return pg


def _write(url: str, n: int) -> None:
    """``n`` bulk baselines into the store at ``url``, in a child (the benchmark process stays small)."""
    code = ("import sys; from kbase.store import open_store; from kbase.synth.history import write_bulk_history; "
            "st = open_store(sys.argv[1]); write_bulk_history(st.engine, int(sys.argv[2]), workload='bulk', "
            f"n_kernels={KERNELS}, iterations={ITERATIONS}); st.close()")
    proc = subprocess.run([sys.executable, "-c", code, url, str(n)], capture_output=True, text=True, env=child_env())
    if proc.returncode != 0:
        raise SystemExit(f"benchmark: writing {n} baselines failed\n{proc.stderr[-3000:]}")


def s9_postgresql(out: Path, n: int, res: Results, log, runs: int = 5) -> None:
    pg = _pg_helpers()
    server = None
    admin = os.environ.get("KBASE_BENCH_PG_URL")
    try:
        if admin:
            admin = "postgresql+psycopg2://" + admin.split("://", 1)[1]
        else:
            server = pg.PgServer()
            admin = server.start()
    except pg.PgUnavailable as exc:
        res.add("S9", "PostgreSQL vs SQLite per command", float("nan"), "x", 0, note=f"no server: {exc}")
        return
    made: list[str] = []
    try:
        _s9(out, n, res, log, runs, pg, admin, made)
    finally:
        for url in made:
            pg.drop_database(admin, url)
        if server is not None:
            server.stop()


def _s9(out: Path, n: int, res: Results, log, runs: int, pg, admin: str, made: list[str]) -> None:
    from kbase.synth.history import _bulk_mix

    db = build_in_child("run", "ensure_bulk_store", out=out, name=f"s9_store_{n}", n=n, kernels=KERNELS,
                        iterations=ITERATIONS)
    made.append(pg.create_database(admin, prefix="kbase_bench_s9_"))
    log(f"S9 writing the same {n:,} baselines into PostgreSQL ...")
    _write(made[-1], n)
    urls = {"SQLite": f"sqlite:///{db}", "PostgreSQL": made[-1]}
    i, j = n // 2, n // 2 + 1
    hot = _bulk_mix(1)[0].name
    commands = {
        "list": ("kbase list -n 50", ["list", "-n", "50"]),
        "show": (f"kbase show @{i}", ["show", f"@{i}"]),
        "history": (f"kbase history NAME --format json ({n:,} rows)", ["history", hot, "--format", "json"]),
        "diff": (f"kbase diff @{i} @{j}", ["diff", f"@{i}", f"@{j}", "--name", "bulk"]),
        "gate": (f"kbase gate @{i} @{j}", ["gate", f"@{i}", f"@{j}", "--name", "bulk"]),
        "steps": ("kbase steps (last 50 baselines)", ["steps", "--name", "bulk"]),
    }
    log(f"S9 PostgreSQL vs SQLite, {n:,} baselines x {KERNELS} kernels: {runs} rounds  load {loadavg()}")
    got = timed_pairs(out, {f"{key} {backend}": [*kbase_cmd(), *argv, "--db", url]
                            for key, (_, argv) in commands.items() for backend, url in urls.items()},
                      runs, ok_codes=(0, 1))
    for key, (label, _) in commands.items():
        lite, post = got[f"{key} SQLite"], got[f"{key} PostgreSQL"]
        ratio = [p.wall_s / s.wall_s for s, p in zip(lite, post)]
        cpu = [p.cpu_s / s.cpu_s for s, p in zip(lite, post)]
        res.add("S9", f"{label}: PostgreSQL / SQLite (pairwise)", med(ratio), "x", runs, f"<= {PG_X}x",
                med(ratio) <= PG_X, best=min(ratio),
                note=(f"PostgreSQL {med([r.wall_s for r in post]):.3f} s, SQLite {med([r.wall_s for r in lite]):.3f} s;"
                      f" CPU {med([r.cpu_s for r in post]):.3f} / {med([r.cpu_s for r in lite]):.3f} s "
                      f"({med(cpu):.2f}x)"))
    res.raw["S9"] = {k: [r.__dict__ for r in v] for k, v in got.items()}
    _snapshot_writes(out, res, log, pg, admin, made)


def _snapshot_writes(out: Path, res: Results, log, pg, admin: str, made: list[str], runs: int = 3) -> None:
    """``kbase snapshot`` of the 1M export into a store at the head schema on each backend (ten baselines in
    it already): what a CI job's write costs on PostgreSQL."""
    export = build_in_child("bench_common", "ensure_export", out=out, n_kernels=1_000_000, seed=1)
    lite = out / "s9_snapshot.db"
    rm_store(lite)
    made.append(pg.create_database(admin, prefix="kbase_bench_s9_snap_"))
    urls = {"SQLite": f"sqlite:///{lite}", "PostgreSQL": made[-1]}
    for url in urls.values():
        _write(url, 10)
    log(f"S9 snapshot of the 1M export into each backend: {runs} pairs  load {loadavg()}")
    got: dict[str, list] = {b: [] for b in urls}
    for k in range(runs):
        for backend, url in urls.items():
            got[backend].append(run_child([*kbase_cmd(), "snapshot", str(export), "--db", url, "--no-git", "--rev",
                                           rev_of(k), "--force", "-n", "1"], out))
    ratio = [p.wall_s / s.wall_s for s, p in zip(got["SQLite"], got["PostgreSQL"])]
    res.add("S9", "kbase snapshot 1M into a store: PostgreSQL / SQLite (pairwise)", med(ratio), "x", runs,
            best=min(ratio), note=(f"PostgreSQL {med([r.wall_s for r in got['PostgreSQL']]):.3f} s, SQLite "
                                   f"{med([r.wall_s for r in got['SQLite']]):.3f} s (a write: reported, no target)"))
    rm_store(lite)
    res.raw["S9_snapshot"] = {k: [r.__dict__ for r in v] for k, v in got.items()}
