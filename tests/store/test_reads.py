"""Issue 40: every read of the store has one implementation — the generated statements (``read_sql``) on one
DB-API connection (``reader.StoreReader``: Python's sqlite3 for SQLite, psycopg for PostgreSQL). Each read is
held against a plain SQL query of the same rows (the column values, counts and aggregates any SQL client
sees), on a store filled with every odd value (NULLs, booleans, quoted names, a baseline without kernels);
what lives only in the kernel blobs is held equal across the two backends (the PostgreSQL cases read a copy
of the SQLite store, ``pg.copy_store``). ``test_pg_connect`` holds what is PostgreSQL's alone.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import sqlite3
from datetime import UTC, date, datetime
from pathlib import Path

import pytest

import kbase
from kbase.store.schema.records import (
    ACCEPTANCE_FIELDS,
    BASELINE_FIELDS,
    KERNEL_ROW_FIELDS,
    AcceptanceRecord,
    BaselineRecord,
)

from helpers.cli import run_kbase
from helpers.kernel_tables import edit_kernels
from helpers.library import old_schema_copy


def _fill(url: str) -> list[str]:
    """Two workloads of bulk baselines, then edits that put every odd value in: NULLs, booleans set,
    tags, a formula-like and quoted kernel name, a baseline without kernels, three acceptances."""
    from kbase.store import open_store
    from kbase.store.schema.models import Acceptance
    from kbase.store.write.queries import add_acceptance
    from kbase.synth.history import write_bulk_history

    with open_store(url) as st:
        write_bulk_history(st.engine, 5, workload="bulk", n_kernels=12, iterations=6)
        write_bulk_history(st.engine, 3, workload="other", n_kernels=8, iterations=4, seed=3)
        for pattern, wl, exp in (("*gemm*", "bulk", None), ("/nccl/", "bulk", date(2020, 1, 2)),
                                 ("x", "other", date(2999, 1, 1))):
            add_acceptance(st.engine, Acceptance(workload=wl, pattern=pattern, commit="c" * 40, reason="known",
                                                 author="a", expires=exp))
    path = url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE baseline SET commit_date = NULL, dirty = 1, detached = 1, branch = '', "
                     "tags = '[\"nightly\",\"a,b\"]', step_wall_ns = 1234.5, note = 'n' WHERE id = 2")
        conn.execute("UPDATE baseline SET created_at = '2026-01-05 11:30:00.000000+00:00' WHERE id = 3")
        conn.execute("UPDATE baseline SET aligned = 0 WHERE id = 4")
        conn.execute("UPDATE baseline SET source_probe = 'p' || id, source_mtime_ns = 7 WHERE id IN (5, 6)")
        conn.execute("DELETE FROM baseline_kernels WHERE baseline_id = 7")
    conn.close()

    def nulls(t) -> None:  # NULL levels (no iteration markers) and a fragmented flag on ranks 2 and 5
        for c in ("per_iter_ns", "count_per_iter", "amdahl_ceiling", "share_window"):
            getattr(t, c)[[1, 4]] = float("nan")
        t.fragmented[[1, 4]] = True
        t.iter_ns[2], t.iter_count[2] = 0.0, 0.0  # rank 3: no samples stored

    edit_kernels(path, 2, nulls)
    edit_kernels(path, 4, lambda t: t.share_kernel.fill(float("nan")))
    rank4 = int(edit_kernels(path, 5, lambda t: None).name_id[3])
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE kernel_name SET name = '=cmd|\"x\", y' || char(13) || 'z', short_name = '=cmd' "
                     "WHERE id = ?", (rank4,))
    names = [r[0] for r in conn.execute("SELECT name FROM kernel_name ORDER BY id LIMIT 3")]
    conn.close()
    return names


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory) -> tuple[str, list[str], Path]:
    root = tmp_path_factory.mktemp("reads")
    url = f"sqlite:///{root / 'kb.db'}"
    return url, _fill(url), root


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(request, sqlite_store) -> tuple[str, list[str], Path]:
    """The filled store on each backend (PostgreSQL: a copy of the SQLite one)."""
    if request.param == "sqlite":
        return sqlite_store
    url, names, root = sqlite_store
    return request.getfixturevalue("pg_copy_of")(url), names, root


@pytest.fixture(scope="module")
def reader(store):
    from kbase.store import open_store

    with open_store(store[0], readonly=True) as st:
        yield st.reader


def plain(url: str, sql: str, params: tuple = ()) -> list[tuple]:
    """``sql`` (``?`` parameters) as any SQL client runs it: sqlite3, or psycopg (``%s``)."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()
    import psycopg

    from helpers.pg import psycopg_dsn

    with psycopg.connect(psycopg_dsn(url), autocommit=True) as conn:
        return [tuple(r) for r in conn.execute(sql.replace("?", "%s").replace('"commit"', "commit"), params)]


def _value(v):
    """A plain SQL value as a record holds it: datetimes aware UTC (SQLite's text parsed), 0/1 as they are."""
    if isinstance(v, str) and len(v) >= 19 and v[4] == "-" and v[10] in " T" and v[13] == ":":
        v = datetime.fromisoformat(v)
    if isinstance(v, datetime):
        return v.replace(tzinfo=UTC) if v.utcoffset() is None else v.astimezone(UTC)
    return v


def _same(a, b) -> bool:
    """Equal values (NaN equals NaN; a bool equals SQLite's 0/1)."""
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def _as_plain(url: str, table: str, ids: list[int], fields: tuple[str, ...]) -> dict[int, dict]:
    cols = ", ".join(f'"{f}"' if f == "commit" else f for f in fields)
    marks = ", ".join("?" for _ in ids) or "NULL"
    rows = plain(url, f"SELECT {cols} FROM {table} WHERE id IN ({marks})", tuple(ids))
    return {r[0]: {f: _value(v) for f, v in zip(fields, r)} for r in rows}


def _records_are_rows(url: str, records: list, table: str = "baseline") -> None:
    """Each record equals its row as plain SQL reads it, field for field, with the record types."""
    fields = BASELINE_FIELDS if table == "baseline" else ACCEPTANCE_FIELDS
    rows = _as_plain(url, table, [r.id for r in records], fields)
    for rec in records:
        assert isinstance(rec, BaselineRecord if table == "baseline" else AcceptanceRecord)
        got, want = dataclasses.asdict(rec), rows[rec.id]
        bad = [(f, got[f], want[f]) for f in fields if not _same(got[f], want[f])]
        if table == "acceptance" and want["expires"] is not None:  # SQLite's DATE text
            bad = [b for b in bad if not (b[0] == "expires" and str(b[1]) == str(b[2]))]
        assert not bad, bad
        assert rec.created_at.tzinfo is not None and rec.created_at.utcoffset().total_seconds() == 0


# ------------------------------------------------------------------ the schema the records are read with


def test_record_fields_are_the_models_columns():
    from kbase.store.read.read_sql import SQL
    from kbase.store.schema.models import ACCEPTANCE, BASELINE, BASELINE_KERNELS

    assert list(BASELINE_FIELDS) == [c.name for c in BASELINE.columns]
    assert list(ACCEPTANCE_FIELDS) == [c.name for c in ACCEPTANCE.columns]
    assert list(KERNEL_ROW_FIELDS) == [c.name for c in BASELINE_KERNELS.columns]
    for name in ("baseline", "baselines", "baselines_at", "duplicate_baseline", "line_baselines_at"):
        assert SQL["sqlite"][name].startswith("SELECT " + ", ".join(f"baseline.{f}" if f != "commit" else 'baseline."commit"'
                                                          for f in BASELINE_FIELDS) + " \nFROM baseline ")
    # (the kernel time by op, ``ops``, is read by its own statement, ``op_blobs``: a diff alone needs it)
    blobs = [c.name for c in BASELINE_KERNELS.columns if c.name not in ("kernels", "ops", "op_ids")]
    assert SQL["sqlite"]["kernel_blobs"].startswith("SELECT " + ", ".join(f"baseline_kernels.{c}" for c in blobs) + " ")
    assert dataclasses.is_dataclass(BaselineRecord) and dataclasses.is_dataclass(AcceptanceRecord)


def test_schema_names_match_the_models():
    from sqlmodel import SQLModel

    import kbase.store.schema.models  # noqa: F401 - registers the tables
    from kbase.store.schema.schema_names import OWN_TABLES

    assert set(SQLModel.metadata.tables) | {"alembic_version"} == set(OWN_TABLES)


# ------------------------------------------------------------------ baselines: the records against plain SQL


@pytest.mark.parametrize("query", [{}, {"workload": "other"}, {"branch": "main"}, {"limit": 2}, {"commit": "a"},
                                   {"commit": "%"}, {"branch": "nope"}])
def test_list_is_the_rows_plain_sql_selects(store, query):
    url, _, _ = store
    got = kbase.baselines(kbase.Settings.load(db=url), **query)
    where, params = ["1 = 1"], []
    for key, column in (("workload", "workload"), ("branch", "branch")):
        if key in query:
            where.append(f"{column} = ?")
            params.append(query[key])
    rows = plain(url, f"SELECT id, \"commit\" FROM baseline WHERE {' AND '.join(where)} "
                      "ORDER BY created_at DESC, id DESC", tuple(params))
    if "commit" in query:  # a prefix of the hash, taken literally ('%' is no wildcard)
        rows = [r for r in rows if r[1].startswith(query["commit"].lower())]
    assert [b.id for b in got] == [r[0] for r in rows][: query.get("limit", 50)]
    _records_are_rows(url, list(got))


def test_an_unknown_workload_is_named_with_the_stored_ones(store):
    from kbase.errors import UnknownWorkloadError

    url, _, _ = store
    with pytest.raises(UnknownWorkloadError, match="bulk, other"):
        kbase.baselines(kbase.Settings.load(db=url), workload="nope")


def test_single_baseline_reads_are_the_rows(store, reader):
    from kbase.errors import InputError

    url, _, _ = store
    _records_are_rows(url, [reader.baseline(i) for i in range(1, 9)])
    with pytest.raises(InputError, match="no such baseline"):
        reader.baseline(99)
    assert reader.get_baseline(99) is None
    b = reader.baseline(5)
    key = (b.commit, b.source_probe, b.source_size, b.source_mtime_ns, b.window_spec, b.kbase_version)
    [(newest,)] = plain(url, "SELECT max(id) FROM baseline WHERE \"commit\" = ? AND source_probe = ? AND source_size = ? "
                             "AND source_mtime_ns = ? AND window_spec = ? AND kbase_version = ?", key)
    assert reader.find_by_identity(*key) == newest == 5 and reader.find_by_identity(*key, workload="nope") is None
    dup = reader.find_duplicate(b.workload, b.commit, b.source_sha256, b.window_spec)
    assert dup == b


def test_baselines_at_commits_are_the_rows(store, reader):
    url, _, _ = store
    commits = [r[0] for r in plain(url, "SELECT \"commit\" FROM baseline ORDER BY id")]
    for wl, cs in (("bulk", commits), ("other", commits[:4]), ("bulk", []), ("nope", commits)):
        got = reader.baselines_at(wl, cs)
        marks = ", ".join("?" for _ in cs) or "NULL"
        want: dict[str, list[int]] = {}
        for bid, c in plain(url, f"SELECT id, \"commit\" FROM baseline WHERE workload = ? AND \"commit\" IN ({marks}) "
                                 "ORDER BY id", (wl, *cs)):
            want.setdefault(c, []).append(bid)
        assert {c: [b.id for b in bs] for c, bs in got.items()} == want


def test_lines_of_commits_are_the_rows(store, reader):
    """``line_baselines`` / ``line_points``: the newest ``limit`` rows (plain SQL's order), oldest first; along a
    line of commits, by line position then creation."""
    url, _, _ = store
    rows = plain(url, "SELECT id, \"commit\", fingerprint, created_at FROM baseline WHERE workload = 'bulk'")
    rows = [(i, c, f, _value(t)) for i, c, f, t in rows]
    commits = [r[1] for r in sorted(rows)][::-1]
    fp = reader.baseline(3).fingerprint
    for kw in ({}, {"fingerprint": fp}, {"limit": 2}, {"before_id": 3}, {"commits": commits[::-1], "limit": 3},
               {"commits": commits[1:], "fingerprint": fp, "before_id": 8}, {"commits": []}, {"limit": 0},
               {"commits": commits, "limit": 0}):
        keep = [r for r in rows if r[2] == kw.get("fingerprint", r[2]) and r[0] <= kw.get("before_id", r[0])]
        limit = kw.get("limit", 20)
        if "commits" in kw:
            pos = {c: i for i, c in enumerate(kw["commits"])}
            keep = sorted((r for r in keep if r[1] in pos), key=lambda r: (-pos[r[1]], r[3], r[0]))
            want = [r[0] for r in (keep[-limit:] if limit else keep)]
        else:
            want = [r[0] for r in sorted(keep, key=lambda r: (r[3], r[0]), reverse=True)[:limit]][::-1]
        got = reader.line_baselines("bulk", **kw)
        assert [b.id for b in got] == want, kw
        _records_are_rows(url, got)
        if "fingerprint" not in kw and "before_id" not in kw:
            points = reader.line_points("bulk", **kw)
            assert [p.id for p in points] == want and all(p.created_at.tzinfo is not None for p in points)
            assert [p.commit for p in points] == [b.commit for b in got]
            assert [(p.window_ns, p.iterations_used, p.aligned) for p in points] == [
                (b.window_ns, b.iterations_used, b.aligned) for b in got]


def test_trend_reads_are_the_rows(store, reader):
    url, _, _ = store
    assert reader.workloads() == [r[0] for r in plain(url, "SELECT DISTINCT workload FROM baseline ORDER BY workload")]
    for wl, branch in (("bulk", None), ("other", None), ("bulk", "main"), ("nope", None)):
        got = reader.trend_baselines(wl, branch)
        rows = plain(url, "SELECT id, \"commit\", window_ns, aligned FROM baseline WHERE workload = ? "
                          "AND (? OR branch = ?) ORDER BY created_at, id", (wl, branch is None, branch or ""))
        assert [(r["id"], r["commit"], r["window_ns"], r["aligned"]) for r in got] == [
            (i, c, w, bool(a)) for i, c, w, a in rows]
        assert all(type(r["aligned"]) is bool and r["created_at"].tzinfo is not None for r in got)
    ids = [1, 2, 7]
    assert sorted(reader.budget_summaries(ids)) == sorted(plain(
        url, "SELECT id, summary_json FROM baseline WHERE id IN (?, ?, ?)", tuple(ids)))


# ------------------------------------------------------------------ kernels: names by plain SQL, blobs by their counts


def test_kernel_names_are_the_rows(store, reader):
    url, _, _ = store
    assert reader.kernel_names() == tuple(map(list, zip(*plain(url, "SELECT name, short_name FROM kernel_name "
                                                                    "ORDER BY id"))))
    for wl in ("bulk", "other", "nope"):
        rows = plain(url, "SELECT name, short_name FROM kernel_name WHERE id IN (SELECT name_id FROM workload_kernel "
                          "WHERE workload = ?) ORDER BY id", (wl,))
        assert reader.kernel_names(wl) == ([r[0] for r in rows], [r[1] for r in rows])
    names = reader.kernel_names()[0]
    hashes = [hashlib.sha1(n.encode()).hexdigest() for n in names + ["none"]]
    marks = ", ".join("?" for _ in hashes)
    ids = reader.name_ids(names + ["none"])
    assert sorted(ids) == sorted(r[0] for r in plain(url, f"SELECT id FROM kernel_name WHERE name_hash IN ({marks})",
                                                     tuple(hashes)))
    assert len(ids) == len(names) - 1  # (one name edited: its hash is stale)
    assert sorted(reader.names_by_id(ids)) == sorted(plain(
        url, f"SELECT id, name, short_name, category, tc, family FROM kernel_name WHERE id IN "
             f"({', '.join('?' for _ in ids)})", tuple(ids)))


def test_kernel_tables_hold_what_the_rows_count(store, reader):
    """Each baseline's table has the row's ``kernels`` kernels, whose time adds up to ``total_kernel_ns``; a
    baseline without a kernel table has none; the leaderboard and the history agree with it."""
    url, names, _ = store
    counted = dict(plain(url, "SELECT baseline_id, kernels FROM baseline_kernels"))
    totals = dict(plain(url, "SELECT id, total_kernel_ns FROM baseline"))
    tables = reader.kernel_tables(list(range(1, 10)))
    assert {b: len(t) for b, t in tables.items()} == counted and 7 not in tables
    for bid, t in tables.items():
        assert int(t.total_ns.sum()) == totals[bid]
        lb = reader.leaderboard(reader.baseline(bid))
        assert len(lb.rows) == counted[bid] and sum(r["total_ns"] for r in lb.rows) == totals[bid]
        assert [r["name"] for r in lb.rows] == [n[0] for n in map(reader.names(t.name_id.tolist()).get,
                                                                  t.name_id.tolist())]
        assert len(reader.leaderboard_view(bid)) == counted[bid]
        assert len(reader.kernel_levels([bid])) == counted[bid]
    assert reader.leaderboard(reader.baseline(7)).rows == [] and reader.leaderboard_view(7) == []
    with_kernels = [r[0] for r in plain(url, "SELECT b.id FROM baseline b JOIN baseline_kernels k ON "
                                             "k.baseline_id = b.id WHERE b.workload = 'bulk' ORDER BY b.created_at, b.id")]
    history = reader.kernel_history_rows(names[0], "bulk")
    assert [r["id"] for r in history] == [i for i in with_kernels if any(
        r["name"] == names[0] for r in reader.leaderboard(reader.baseline(i)).rows)]
    assert reader.kernel_history_rows("none") == []
    ids = list(counted)
    found, levels = reader.level_matrix(ids)[::2]
    assert levels.shape == (len(found), len(ids))


def test_acceptances_are_the_rows(store, reader):
    url, _, _ = store
    for kw in ({}, {"workload": "bulk"}, {"workload": "other"}, {"active_on": date(2021, 1, 1)},
               {"workload": "bulk", "active_on": date(2020, 1, 2)}):
        got = reader.list_acceptances(**kw)
        rows = plain(url, "SELECT id, workload, expires FROM acceptance ORDER BY id")
        want = [i for i, wl, exp in rows if wl == kw.get("workload", wl) and (
            "active_on" not in kw or exp is None or str(exp) >= kw["active_on"].isoformat())]
        assert [a.id for a in got] == want, kw
        _records_are_rows(url, got, "acceptance")
    assert len(reader.list_acceptances()) == 3 and reader.get_acceptance(99) is None
    assert reader.get_acceptance(2) == reader.list_acceptances()[1]
    assert reader.get_acceptance(2).expires == date(2020, 1, 2)


# ------------------------------------------------------------------ the two backends: one executor, the same answers


@pytest.fixture(scope="module")
def both(sqlite_store, pg_copy_of):
    """The filled store on SQLite and its PostgreSQL copy."""
    url, names, root = sqlite_store
    return url, pg_copy_of(url), names


def test_blob_reads_are_equal_on_both_backends(both):
    """What lives only in the kernel blobs (tables, leaderboards, histories, the report's series): the same values
    and types on both backends."""
    import numpy as np

    from kbase.store import open_store

    lite_url, pg_url, names = both
    with open_store(lite_url, readonly=True) as a, open_store(pg_url, readonly=True) as b:
        lite, post = a.reader, b.reader
        assert (lite.dialect, post.dialect) == ("sqlite", "postgresql")
        for ids in ([1], [2], [4, 2], [7], list(range(1, 10)), [], [99]):
            f, s = lite.kernel_tables(ids), post.kernel_tables(ids)
            assert f.keys() == s.keys()
            for bid in f:
                for col, value in vars(f[bid]).items():
                    other = getattr(s[bid], col)
                    assert (value is None) == (other is None), col
                    pairs = [(f"{col}.{k}", v, other[k]) for k, v in value.items()] if isinstance(value, dict) else \
                        [(col, value, other)] if value is not None else []
                    assert not isinstance(value, dict) or value.keys() == other.keys(), col
                    for name, x, y in pairs:
                        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), name
            fl, sl = lite.level_matrix(ids), post.level_matrix(ids)
            assert fl[:2] == sl[:2] and np.array_equal(fl[2], sl[2], equal_nan=True)
        for bid in (1, 2, 4, 5, 7):
            x, y = lite.leaderboard(lite.baseline(bid)), post.leaderboard(post.baseline(bid))
            assert (x.columns, x.summary, x.notes, x.bounds()) == (y.columns, y.summary, y.notes, y.bounds())
            assert [[(k, type(v)) for k, v in r.items()] for r in x.rows] == [
                [(k, type(v)) for k, v in r.items()] for r in y.rows]
            assert all(_same(r[k], q[k]) for r, q in zip(x.rows, y.rows) for k in r)
            assert lite.leaderboard_view(bid) == post.leaderboard_view(bid)
        for name, kw in ((names[0], {}), (names[1], {"workload": "other"}), (names[0], {"branch": "main"})):
            assert lite.kernel_history_rows(name, **kw) == post.kernel_history_rows(name, **kw)
        ids = lite.name_ids(names)
        (lc, ls), (pc, ps) = lite.kernel_series(ids, [1, 2, 3, 7, 99]), post.kernel_series(ids, [1, 2, 3, 7, 99])
        assert lc.keys() == pc.keys() and all(lc[k].dtype == pc[k].dtype and np.array_equal(lc[k], pc[k]) for k in lc)
        assert len(ls) == len(ps) and all((x is None and y is None) or np.array_equal(x, y) for x, y in zip(ls, ps))
        assert sorted(lite.kernel_levels([1, 2, 7]), key=repr) == sorted(post.kernel_levels([1, 2, 7]), key=repr)


SHOW_ARGS = [["-f", f] for f in ("table", "json", "csv", "md", "bmf", "github-benchmark")] + [
    ["-q"], ["--wide", "-n", "0"], ["--full-names", "-f", "md", "-n", "0"], ["-f", "json", "-n", "2"]]


@pytest.mark.slow
@pytest.mark.parametrize("bid", [2, 4, 5, 7])
@pytest.mark.parametrize("args", SHOW_ARGS, ids=lambda a: " ".join(a))
def test_show_output_is_the_same_on_both_backends(both, bid, args):
    lite, post = (run_kbase("show", f"@{bid}", "--db", url, *args) for url in both[:2])
    assert lite.rc == 0, lite
    assert (lite.rc, lite.stdout, lite.stderr) == (post.rc, post.stdout, post.stderr)


@pytest.mark.parametrize("args", [["list"], ["list", "-f", "json"], ["list", "-q"], ["list", "--wide", "-n", "0"],
                                  ["list", "--commit", "A"], ["history", "{0}"], ["history", "{1}", "-f", "json"],
                                  ["history", "{2}", "-f", "csv"], ["history", "{0}", "--name", "other"],
                                  ["history", "no-such-kernel"], ["show", "@99"], ["show", "@x"]])
def test_list_and_history_output_is_the_same_on_both_backends(both, args):
    argv = [a.format(*both[2]) for a in args]
    lite, post = (run_kbase(*argv, "--db", url) for url in both[:2])
    assert (lite.rc, lite.stdout, lite.stderr) == (post.rc, post.stdout, post.stderr)


def test_list_json_states_the_rows(sqlite_store):
    url, _, _ = sqlite_store
    r = run_kbase("list", "-f", "json", "-n", "0", "--db", url)
    assert r.rc == 0, r
    got = json.loads(r.stdout)["baselines"]
    rows = plain(url, "SELECT id, workload, \"commit\", tags FROM baseline ORDER BY created_at DESC, id DESC")
    assert [(b["id"], b["workload"], b["commit"], b["tags"]) for b in got] == [
        (i, wl, c, json.loads(t)) for i, wl, c, t in rows]


# ------------------------------------------------------------------ which stores are read, and how


def test_history_reads_read_the_levels_blob_alone(sqlite_store):
    """``kbase history`` and ``steps`` read each baseline's ``levels`` blob (the first of its row) through the
    primary key, never the board, samples or sketches behind it (0009)."""
    from kbase.store.read.connect import bind
    from kbase.store.read.read_sql import SQL

    conn = sqlite3.connect(sqlite_store[0].removeprefix("sqlite:///"))
    args = {"any_workload": False, "workload": "bulk", "any_branch": True, "branch": "", "ids": [1, 2]}
    text = SQL["sqlite"]
    try:
        for name in ("kernel_history", "level_blobs"):
            sql, params = bind(text[name], {k: v for k, v in args.items() if f":{k}" in text[name] or
                                            f"POSTCOMPILE_{k}" in text[name]}, "sqlite")
            plan = " | ".join(r[-1] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
            assert "baseline_kernels" in plan and "PRIMARY KEY" in plan, (name, plan)
            for dialect in ("sqlite", "postgresql"):
                selected = SQL[dialect][name].split("FROM")[0]
                assert "levels" in selected and not any(c in selected for c in ("board", "samples", "sketches")), \
                    (dialect, name)
        cols = [r[1] for r in conn.execute("PRAGMA table_info(baseline_kernels)")]
        assert cols.index("levels") < min(cols.index(c) for c in ("board", "samples", "sketches"))
    finally:
        conn.close()


def test_the_read_connection_opens_only_head_schema_kbase_stores(sqlite_store, tmp_path):
    """``connect.open_read``: a store at the head schema as it is; an older one upgraded first by the upgrade the
    engine passes in (without one: ``NotAtHead``, the file unchanged); another application's file or a text file refused
    untouched; a missing store ``NoStoreError``, nothing created."""
    from kbase.errors import StoreError
    from kbase.store.engine import upgrade_to_read
    from kbase.store.read.connect import NotAtHead, open_read, sqlite_stamp
    from kbase.store.schema.errors import NoStoreError
    from kbase.store.schema.schema_names import head_revision

    url, _, _ = sqlite_store
    open_read(url, 5.0, 5.0).close()
    old = old_schema_copy(url, tmp_path / "old.db")
    before = (tmp_path / "old.db").read_bytes()
    with pytest.raises(NotAtHead) as not_head:
        open_read(old, 5.0, 5.0)
    assert not not_head.value.empty and (tmp_path / "old.db").read_bytes() == before
    (tmp_path / "empty.db").write_bytes(b"")  # a store still to be created: nothing stored, and nothing made
    with pytest.raises(NotAtHead) as not_head:
        open_read(f"sqlite:///{tmp_path / 'empty.db'}", 5.0, 5.0)
    assert not_head.value.empty and (tmp_path / "empty.db").read_bytes() == b""
    conn = open_read(old, 5.0, 5.0, lambda stamped: upgrade_to_read(old, 5.0, stamped))
    assert sqlite_stamp(conn) == [head_revision()]
    conn.close()
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as c:
        c.execute("CREATE TABLE notes (x)")
    (tmp_path / "text.db").write_text("not a database")
    for other, what in ((foreign, "not a kbase store"), (tmp_path / "text.db", "not a SQLite database")):
        kept = other.read_bytes()
        with pytest.raises(StoreError, match=what):
            open_read(f"sqlite:///{other}", 5.0, 5.0)
        assert other.read_bytes() == kept
    with pytest.raises(NoStoreError):
        open_read(f"sqlite:///{tmp_path / 'no.db'}", 5.0, 5.0)
    assert not (tmp_path / "no.db").exists()


@pytest.mark.parametrize("args", [["list"], ["show", "@2", "-f", "json"], ["history", "{0}", "-f", "csv", "--name", "bulk"]])
def test_other_stores_answer_in_one_line(sqlite_store, tmp_path, args):
    """An old schema is upgraded on use and read; a foreign database is refused in one line (exit 2), and so is
    a missing store (``list``: none listed), nothing created or changed."""
    url, names, _ = sqlite_store
    argv = [a.format(*names) for a in args]
    old = old_schema_copy(url, tmp_path / "old.db")
    assert run_kbase(*argv, "--db", old).rc == 0
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (x)")
    kept = foreign.read_bytes()
    missing = f"sqlite:///{tmp_path / 'missing.db'}"
    for db, what in ((f"sqlite:///{foreign}", "not a kbase store"), (missing, "no store at")):
        r = run_kbase(*argv, "--db", db)
        if db == missing and args[0] == "list":
            assert r.rc == 0 and "0 baseline(s)" in r.stdout, r
            continue
        assert r.rc == 2 and r.stderr.count("\n") == 1 and what in r.stderr and "Traceback" not in r.stderr, r
    assert foreign.read_bytes() == kept and not (tmp_path / "missing.db").exists()


@pytest.mark.parametrize("bid", [2, 4, 5, 7])
def test_stored_capture_of_a_record(store, reader, bid):
    """``reader.load_capture`` of a record: the kernel table's columns in the stored rank order, the summary the
    row's ``summary_json`` holds."""
    import numpy as np

    from kbase.store.read.reader import load_capture

    url, _, _ = store
    c = load_capture(reader, reader.baseline(bid))
    t = reader.kernel_table(bid)
    [(summary,)] = plain(url, "SELECT summary_json FROM baseline WHERE id = ?", (bid,))
    assert c.summary.total_kernel_ns == json.loads(summary)["total_kernel_ns"]
    assert c.names.tolist() == [reader.names([i])[i][0] for i in t.name_id.tolist()]
    np.testing.assert_array_equal(c.total_ns, t.total_ns.astype(float))
