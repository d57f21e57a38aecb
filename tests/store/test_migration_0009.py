"""Migration 0009 (kernel rows -> one ``baseline_kernels`` row of packed blobs per baseline) on a store written
at 0008 exactly as 0008's kbase wrote it (``_write_0008``: float32 samples and sketches in a row per kernel),
holding a baseline from before 0005 (no sketches) and one without iteration markers (no samples).

Converted, it must equal the same captures stored by this kbase (blob for blob), so every command answers
the same on both (``show``, ``history``, ``diff``, ``gate``, ``steps``: byte for byte); every leaderboard value
is kept exactly; SQLite gets its space back; and the downgrade writes rows that upgrade to the same blobs.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from sqlalchemy import text

import kbase
from kbase.gitrepo import CommitInfo
from kbase.readers import source
from kbase.store import engine as kdb
from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase
from helpers.kernel_tables import assert_same_kernels, downgrade, dump_kernels

BEFORE = "0008"
LATER = {"kind", "capture_span"}  # baseline columns of revisions after 0008


@pytest.fixture(scope="module")
def captures(tmp_path_factory) -> list[tuple[Path, Any]]:
    """(export, leaderboard with sketches): two aligned captures of one workload, one without step markers
    (no per-iteration samples), and the first again as a baseline from before 0005 (no sketches)."""
    d = tmp_path_factory.mktemp("m9")
    out = []
    for seed, nvtx in ((1, True), (2, True), (3, False)):
        path = d / f"run{seed}.sqlite"
        generate_export(path, ExportSpec(n_gpus=2, iterations=8, seed=seed, nvtx=nvtx))
        s = kbase.Settings.load(db=f"sqlite:///{d / 'unused.db'}")
        out.append((path, kbase.leaderboard(kbase.window(kbase.read(path, s), s), sketches=True)))
    old = kbase.leaderboard(kbase.window(kbase.read(out[0][0], s), s), sketches=True)
    old.sketches = {}
    out.append((out[0][0], old))
    return out


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request, tmp_path):
    if request.param == "sqlite":
        yield lambda name: f"sqlite:///{tmp_path / name}"
        return
    pg = request.getfixturevalue("pg_url")
    from helpers import pg as pgmod

    made: list[str] = []
    yield lambda name: made.append(pgmod.create_database(pg)) or made[-1]
    for u in made:
        pgmod.drop_database(pg, u)


def _baseline_values(captures) -> list[tuple[dict[str, Any], Any]]:
    """One baseline row per capture (fixed creation times: both stores get the very same rows)."""
    from datetime import UTC, datetime, timedelta

    from kbase.store.codec.codec import baseline_row

    out = []
    for i, (path, lb) in enumerate(captures):
        commit = CommitInfo(hash=f"{i + 1:040x}", date=None, branch="main", detached=False, dirty=False)
        row = baseline_row(lb, workload="w" if i != 2 else "plain", commit=commit,
                           source=source.describe_source(path, "nsys-sqlite"), window_spec="spec")
        row = dataclasses.replace(row, created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=i), host="host")
        # columns added after 0008 (0011: the budget's step_ns, idle_ns) are not in a store at 0008
        out.append(({k: v for k, v in dataclasses.asdict(row).items() if k not in ("id", "step_ns", "idle_ns",
                                                                                     "capture_span")}, lb))
    return out


def _write_0008(engine, captures) -> None:
    """The captures as 0008's kbase stored them: a ``baseline_kernel`` row per kernel, samples and launch
    sketches as little-endian float32 (its ``codec.kernel_rows``)."""
    from kbase.analysis import sketch
    from kbase.store.codec.codec import _sample_matrices, kernel_naming
    from kbase.store.schema.models import BASELINE
    from kbase.store.write.queries import name_ids

    cols = ("gpus", "count", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns", "std_ns", "per_iter_ns",
            "count_per_iter", "share_window", "share_kernel", "amdahl_ceiling", "fragmented")
    # the baseline table as 0008 had it: the model's columns but those of later revisions (no defaults)
    at_0008 = sa.table("baseline", *[sa.column(c.name, c.type) for c in BASELINE.columns if c.name not in LATER])
    with engine.begin() as conn:
        for values, lb in _baseline_values(captures):
            values = {k: v for k, v in values.items() if k not in LATER}
            bid = conn.execute(at_0008.insert().values(**values).returning(at_0008.c.id)).scalar_one()
            ids = name_ids(conn, kernel_naming(lb))
            keys = json.loads(values["iteration_keys"])
            packed: dict[str, tuple[bytes, bytes]] = {}
            if keys and len(lb.sample_column("name")):
                names, ns, cnt = _sample_matrices(lb.sample_column("name"), lb.sample_column("iteration"),
                                                  lb.sample_column("total_ns"), lb.sample_column("count"), keys)
                packed = {n: (ns[i].astype("<f4").tobytes(), cnt[i].astype("<f4").tobytes())
                          for i, n in enumerate(names)}
            empty = np.zeros(len(keys), dtype="<f4").tobytes() if keys else None
            for rank, row in enumerate(zip(lb.column("name").tolist(), *(lb.column(c).tolist() for c in cols)), 1):
                name, v = row[0], dict(zip(cols, row[1:]))
                for c in ("per_iter_ns", "count_per_iter", "share_window", "share_kernel"):
                    v[c] = None if v[c] is None or math.isnan(v[c]) else v[c]
                v["amdahl_ceiling"] = None if not math.isfinite(v["amdahl_ceiling"]) else v["amdahl_ceiling"]
                ns_b, cnt_b = packed.get(name, (empty, empty))
                conn.execute(text(
                    "INSERT INTO baseline_kernel (baseline_id, name_id, rank, gpus, count, total_ns, avg_ns, "
                    "median_ns, min_ns, max_ns, std_ns, per_iter_ns, count_per_iter, share_window, share_kernel, "
                    "amdahl_ceiling, fragmented, iter_ns, iter_count, launch_sketch) VALUES (:b, :n, :r, :gpus, "
                    ":count, :total_ns, :avg_ns, :median_ns, :min_ns, :max_ns, :std_ns, :per_iter_ns, "
                    ":count_per_iter, :share_window, :share_kernel, :amdahl_ceiling, :fragmented, :i, :c, :s)"),
                    {**v, "b": bid, "n": ids[name], "r": rank, "fragmented": bool(v["fragmented"]), "i": ns_b,
                     "c": cnt_b, "s": sketch.pack(lb.sketches[name]) if name in lb.sketches else None})


def _write_head(engine, captures) -> None:
    """The same captures stored by this kbase (``save_leaderboard``'s kernel table)."""
    import dataclasses

    from kbase.store.codec.codec import stored_table
    from kbase.store.schema.models import BASELINE
    from kbase.store.write.queries import write_kernels

    with engine.begin() as conn:
        for values, lb in _baseline_values(captures):
            bid = conn.execute(BASELINE.insert().values(**values).returning(BASELINE.c.id)).scalar_one()
            table = stored_table(lb, json.loads(values["iteration_keys"]))
            # (0008 kept no kernel time by op: the same captures stored without it)
            write_kernels(conn, values["workload"], [(bid, dataclasses.replace(table, ops=None, op_names=[]))])


def _store_at_0008(url: str, captures) -> None:
    engine = kdb.make_engine(url)
    kdb.upgrade(engine, url, BEFORE)
    _write_0008(engine, captures)
    engine.dispose()


def _blobs(url: str) -> list[tuple]:
    engine = kdb.make_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in conn.execute(text(
                "SELECT baseline_id, format, kernels, levels, board, samples, sketches FROM baseline_kernels "
                "ORDER BY baseline_id"))]
    finally:
        engine.dispose()


def _outputs(url: str, name: str) -> list[tuple]:
    out = []
    for args in (("show", "@1", "-f", "json"), ("show", "@4", "-f", "json"), ("show", "@3", "--wide"),
                 ("show", "@2", "-f", "bmf"), ("history", name, "--all-workloads", "-f", "json"),
                 ("history", name, "--name", "w"),
                 ("diff", "@1", "@2", "-f", "json", "--name", "w"), ("diff", "@4", "@2", "-f", "json", "--name", "w"),
                 ("diff", "@1", "@2", "--all", "--name", "w"), ("gate", "@1", "@2", "-f", "json", "--name", "w"), ("steps", "--name", "w", "-f", "json"), ("list", "-f", "json")):
        r = run_kbase(*args, "--db", url)
        out.append((args, r.rc, r.stdout, r.stderr))
    return out


def test_a_0008_store_converts_to_what_this_kbase_stores(backend, captures):
    old, new = backend("old.db"), backend("new.db")
    _store_at_0008(old, captures)
    engine = kdb.make_engine(old)
    rows_0008 = dump_kernels(engine)
    assert rows_0008[4]["sketches"] is None and rows_0008[3]["ns"] is None  # before 0005; no step markers
    engine.dispose()
    size_0008 = Path(old.removeprefix("sqlite:///")).stat().st_size if old.startswith("sqlite") else 0

    kdb.open_store(old).close()  # a newer kbase opens it: converted
    kdb.open_store(new).close()
    _write_head(kdb.make_engine(new), captures)
    assert kdb.schema_state(kdb.make_engine(old), old)[0] == kdb.head_revision()
    assert _blobs(old) == _blobs(new)  # the very bytes this kbase writes for the same captures
    engine = kdb.make_engine(old)
    assert_same_kernels(rows_0008, dump_kernels(engine))  # leaderboard exact; samples, sketches within their bits
    with engine.connect() as conn:
        pairs = set(conn.execute(text("SELECT workload, name_id FROM workload_kernel")).all())
    engine.dispose()
    assert {w for w, _ in pairs} == {"w", "plain"}

    name = captures[0][1].column("name")[0]
    got, want = _outputs(old, name), _outputs(new, name)
    for g, w in zip(got, want):
        assert g == w, g[0]
        assert g[1] in (0, 1), g
    if old.startswith("sqlite"):  # the dropped rows' pages are given back (VACUUM after the upgrade)
        path = old.removeprefix("sqlite:///")
        assert Path(path).stat().st_size < size_0008
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA freelist_count").fetchone()[0] == 0


def test_downgrade_writes_the_rows_back(backend, captures):
    url = backend("down.db")
    _store_at_0008(url, captures)
    engine = kdb.make_engine(url)
    original = dump_kernels(engine)
    kdb.upgrade(engine, url)
    blobs = _blobs(url)
    downgrade(engine, url, BEFORE)
    assert kdb.schema_state(engine, url)[0] == BEFORE
    assert_same_kernels(original, dump_kernels(engine))  # rows again: leaderboard exact, samples as stored
    kdb.upgrade(engine, url)
    assert _blobs(url) == blobs  # stored values re-encode to themselves
    engine.dispose()


def test_kernel_data_of_another_format_is_refused_in_one_line(tmp_path, captures):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    kdb.open_store(url).close()
    _write_head(kdb.make_engine(url), captures[:2])
    with sqlite3.connect(tmp_path / "f.db") as conn:
        conn.execute("UPDATE baseline_kernels SET format = 99 WHERE baseline_id = 2")
    for args in (("show", "@2", "-f", "json"), ("diff", "@1", "@2"), ("history", captures[0][1].column("name")[0])):
        r = run_kbase(*args, "--db", url)
        assert r.rc == 2 and r.stderr.count("\n") == 1 and "format 99" in r.stderr, (args, r)
    assert run_kbase("show", "@1", "--db", url).rc == 0
