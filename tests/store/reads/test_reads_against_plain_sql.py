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
from datetime import date

import pytest

import kbase
from kbase.store.schema.records import (
    ACCEPTANCE_FIELDS,
    BASELINE_FIELDS,
    KERNEL_ROW_FIELDS,
    AcceptanceRecord,
    BaselineRecord,
)

from helpers.store_reads import (
    plain,
    records_are_rows,
    value,
)

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
    records_are_rows(url, list(got))


def test_an_unknown_workload_is_named_with_the_stored_ones(store):
    from kbase.errors import UnknownWorkloadError

    url, _, _ = store
    with pytest.raises(UnknownWorkloadError, match="bulk, other"):
        kbase.baselines(kbase.Settings.load(db=url), workload="nope")


def test_single_baseline_reads_are_the_rows(store, reader):
    from kbase.errors import InputError

    url, _, _ = store
    records_are_rows(url, [reader.baseline(i) for i in range(1, 9)])
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
    rows = [(i, c, f, value(t)) for i, c, f, t in rows]
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
        records_are_rows(url, got)
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
        records_are_rows(url, got, "acceptance")
    assert len(reader.list_acceptances()) == 3 and reader.get_acceptance(99) is None
    assert reader.get_acceptance(2) == reader.list_acceptances()[1]
    assert reader.get_acceptance(2).expires == date(2020, 1, 2)


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
