"""Issue 15 (and 20 for PostgreSQL): ``kbase list``, ``show @ID`` and ``history`` read a store at the head
schema through ``kbase.store.fast_read`` (SQLite: the standard library's sqlite3; PostgreSQL: libpq; no
SQLAlchemy, no pandas). Both paths must give the same answers, on both backends: the records, the
leaderboard rows and every output format, byte for byte; every other store (old schema, foreign, missing)
goes through the SQLAlchemy path with its own messages. The PostgreSQL cases read a copy of the SQLite
store (``pg.copy_store``); ``test_pg_read`` holds what is PostgreSQL's alone.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import sqlite3
from pathlib import Path

import pytest

import kbase
from kbase.store.fast_read import open_reader
from kbase.store.records import BASELINE_FIELDS, BaselineRecord

from helpers.cli import run_kbase
from helpers.kernel_tables import edit_kernels
from helpers.library import old_schema_copy


def _fill(url: str) -> list[str]:
    """Two workloads of bulk baselines, then edits that put every odd value in: NULLs, booleans set,
    tags, a formula-like and quoted kernel name, a baseline without kernels."""
    from kbase.store import open_store
    from kbase.synth.history import write_bulk_history

    st = open_store(url)
    try:
        write_bulk_history(st.engine, 5, workload="bulk", n_kernels=12, iterations=6)
        write_bulk_history(st.engine, 3, workload="other", n_kernels=8, iterations=4, seed=3)
    finally:
        st.close()
    path = url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE baseline SET commit_date = NULL, dirty = 1, detached = 1, branch = '', "
                     "tags = '[\"nightly\",\"a,b\"]', step_wall_ns = 1234.5, note = 'n' WHERE id = 2")
        conn.execute("UPDATE baseline SET created_at = '2026-01-05 09:00:00.000000+00:00' WHERE id = 3")
        conn.execute("UPDATE baseline SET aligned = 0 WHERE id = 4")
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
    root = tmp_path_factory.mktemp("fastread")
    url = f"sqlite:///{root / 'kb.db'}"
    return url, _fill(url), root


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(request, sqlite_store) -> tuple[str, list[str], Path]:
    """The filled store on each backend (PostgreSQL: a copy of the SQLite one)."""
    if request.param == "sqlite":
        return sqlite_store
    url, names, root = sqlite_store
    return request.getfixturevalue("pg_copy_of")(url), names, root


def _same(a, b) -> bool:
    """Equal values of equal types (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return a == b


def _as_dict(b) -> dict:
    return {f: getattr(b, f) for f in BASELINE_FIELDS}


def test_record_fields_are_the_models_columns():
    from kbase.store.models import BASELINE

    assert list(BASELINE_FIELDS) == [c.name for c in BASELINE.columns]
    from kbase.store.read_sql import SQL

    for name in ("baseline", "baselines", "baselines_at", "duplicate_baseline", "line_baselines_at"):
        assert SQL["sqlite"][name].startswith("SELECT " + ", ".join(f"baseline.{f}" if f != "commit" else 'baseline."commit"'
                                                          for f in BASELINE_FIELDS) + " \nFROM baseline ")
    assert dataclasses.is_dataclass(BaselineRecord)


def test_an_unknown_workload_is_named_with_the_stored_ones(store):
    from kbase.errors import UnknownWorkloadError

    url, _, _ = store
    with pytest.raises(UnknownWorkloadError, match="bulk, other"):
        kbase.baselines(kbase.Settings.load(db=url), workload="nope")


def test_schema_names_match_the_models():
    from sqlmodel import SQLModel

    import kbase.store.models  # noqa: F401 - registers the tables
    from kbase.store.schema_names import OWN_TABLES

    assert set(SQLModel.metadata.tables) | {"alembic_version"} == set(OWN_TABLES)


@pytest.mark.parametrize("query", [{}, {"workload": "other"}, {"branch": "main"}, {"limit": 2}, {"commit": "a"},
                                   {"commit": "%"}])
def test_list_records_equal_the_models(store, query):
    from kbase.store import open_store

    url, _, _ = store
    settings = kbase.Settings.load(db=url)
    fast = kbase.baselines(settings, **query)
    with open_store(url) as st:
        slow = kbase.baselines(settings, store=st, **query)
    assert all(isinstance(b, BaselineRecord) for b in fast)
    assert len(fast) == len(slow)
    for f, s in zip(fast, slow):
        df, ds = _as_dict(f), _as_dict(s)
        assert all(_same(df[k], ds[k]) for k in BASELINE_FIELDS), [(k, df[k], ds[k]) for k in BASELINE_FIELDS
                                                                    if not _same(df[k], ds[k])]
        assert f.created_at.utcoffset() is not None and f.created_at.tzinfo is not None


@pytest.mark.parametrize("bid", [1, 2, 3, 4, 5, 7])
def test_show_rows_equal_the_dataframe_path(store, bid):
    from kbase.store import open_store

    url, _, _ = store
    settings = kbase.Settings.load(db=url)
    from kbase.analysis.board import LeaderboardRows, board_of

    fast = kbase.baseline(f"@{bid}", settings, stored_rows=True)
    assert isinstance(fast.baseline, BaselineRecord) and isinstance(fast.leaderboard, LeaderboardRows)
    with open_store(url) as st:
        slow = kbase.baseline(f"@{bid}", settings, stored_rows=True, store=st)
    a, b = fast.leaderboard, board_of(slow.leaderboard)
    assert a.columns == b.columns and a.summary == b.summary and a.notes == b.notes
    assert len(a.rows) == len(b.rows)
    for ra, rb in zip(a.rows, b.rows):
        assert list(ra) == list(rb)
        assert all(_same(ra[k], rb[k]) for k in ra), [(k, ra[k], rb[k]) for k in ra if not _same(ra[k], rb[k])]
    assert a.bounds() == b.bounds()


def test_rows_csv_is_pandas_to_csv(sqlite_store):
    """The leaderboard CSV no longer goes through pandas: the same bytes as ``to_csv`` of the table."""
    from kbase.analysis.board import board_of
    from kbase.render.leaderboard import leaderboard_csv, row_notes, to_csv
    from kbase.store import open_store, queries

    url, _, _ = sqlite_store
    with open_store(url) as st:
        for bid in (2, 4, 5, 7):
            lb = queries.load_leaderboard(st.engine, bid)
            for limit in (None, 3):
                table = lb.table.head(limit) if limit else lb.table
                notes = row_notes(board_of(lb), board_of(lb).rows[:len(table)])
                table = table.assign(**{k: [getattr(n, k) for n in notes] for k in ("tc_reason", "diagnosis",
                                                                                   "diagnosis_reason")})
                assert leaderboard_csv(lb, limit) == to_csv(table)


SHOW_ARGS = [["-f", f] for f in ("table", "json", "csv", "md", "bmf", "github-benchmark")] + [
    ["-q"], ["--wide", "-n", "0"], ["--full-names", "-f", "md", "-n", "0"], ["-f", "json", "-n", "2"]]


@pytest.mark.slow
@pytest.mark.parametrize("bid", [2, 4, 5, 7])
@pytest.mark.parametrize("args", SHOW_ARGS, ids=lambda a: " ".join(a))
def test_show_output_is_byte_identical(store, monkeypatch, bid, args):
    url, _, _ = store
    fast = run_kbase("show", f"@{bid}", "--db", url, *args)
    monkeypatch.setenv("KBASE_NO_FAST_READ", "1")
    slow = run_kbase("show", f"@{bid}", "--db", url, *args)
    assert fast.rc == 0, fast
    assert (fast.rc, fast.stdout, fast.stderr) == (slow.rc, slow.stdout, slow.stderr)


@pytest.mark.parametrize("args", [["list"], ["list", "-f", "json"], ["list", "-q"], ["list", "--wide", "-n", "0"],
                                  ["list", "--commit", "A"], ["history", "{0}"], ["history", "{1}", "-f", "json"],
                                  ["history", "{2}", "-f", "csv"], ["history", "{0}", "--name", "other"],
                                  ["history", "no-such-kernel"], ["show", "@99"], ["show", "@x"]])
def test_list_and_history_output_is_byte_identical(store, monkeypatch, args):
    url, names, _ = store
    argv = [a.format(*names) for a in args]
    fast = run_kbase(*argv, "--db", url)
    monkeypatch.setenv("KBASE_NO_FAST_READ", "1")
    slow = run_kbase(*argv, "--db", url)
    assert (fast.rc, fast.stdout, fast.stderr) == (slow.rc, slow.stdout, slow.stderr)


def test_history_reads_read_the_levels_blob_alone(sqlite_store):
    """``kbase history`` and ``steps`` read each baseline's ``levels`` blob (the first of its row) through the
    primary key, never the board, samples or sketches behind it (0009)."""
    from kbase.store.read_sql import SQL
    from kbase.store.sqlite_read import bind

    conn = sqlite3.connect(sqlite_store[0].removeprefix("sqlite:///"))
    args = {"any_workload": False, "workload": "bulk", "any_branch": True, "branch": "", "ids": [1, 2]}
    text = SQL["sqlite"]
    try:
        for name in ("kernel_history", "level_blobs"):
            sql, params = bind(text[name], {k: v for k, v in args.items() if f":{k}" in text[name] or
                                            f"POSTCOMPILE_{k}" in text[name]})
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


def test_the_fast_path_reads_only_head_schema_kbase_stores(sqlite_store, tmp_path):
    url, _, _ = sqlite_store
    assert open_reader(url) is not None
    old = old_schema_copy(url, tmp_path / "old.db")
    foreign = tmp_path / "foreign.db"
    shutil.copy(url.removeprefix("sqlite:///"), foreign)
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (x)")
    (tmp_path / "text.db").write_text("not a database")
    for other in (old, f"sqlite:///{foreign}", f"sqlite:///{tmp_path / 'text.db'}", f"sqlite:///{tmp_path / 'no.db'}",
                  "sqlite://", f"sqlite:///{tmp_path}", url + "?mode=ro", "mysql+pymysql://u@h/db"):
        assert open_reader(other) is None, other
    assert not (tmp_path / "no.db").exists()


@pytest.mark.parametrize("args", [["list"], ["show", "@2", "-f", "json"], ["history", "{0}", "-f", "csv"]])
def test_fallback_cases_answer_as_before(sqlite_store, tmp_path, monkeypatch, args):
    """An old schema (migrated on use), a foreign database and a missing store: the SQLAlchemy path's
    answers and messages, the same whether the fast path is on or off."""
    url, names, _ = sqlite_store
    argv = [a.format(*names) for a in args]
    results = []
    for flag in ("", "1"):
        monkeypatch.setenv("KBASE_NO_FAST_READ", flag)
        d = tmp_path / f"run{flag or 0}"
        d.mkdir()
        old = old_schema_copy(url, d / "old.db")
        foreign = d / "foreign.db"
        with sqlite3.connect(foreign) as conn:
            conn.execute("CREATE TABLE notes (x)")
        got = []
        for db in (old, f"sqlite:///{foreign}", f"sqlite:///{d / 'missing.db'}"):
            r = run_kbase(*argv, "--db", db)
            got.append((r.rc, r.stdout, r.stderr.replace(str(d), "DIR")))
        assert not (d / "missing.db").exists()
        results.append(got)
    assert results[0] == results[1]
    assert results[0][1][0] == 2 and "not a kbase store" in results[0][1][2]


# ------------------------------------------------------------------ the reads of diff and gate (StoreReader)


def test_compare_read_columns_are_the_models():
    from kbase.store.models import ACCEPTANCE, BASELINE_KERNELS
    from kbase.store.read_sql import SQL
    from kbase.store.records import ACCEPTANCE_FIELDS, AcceptanceRecord

    # (the kernel time by op, ``ops``, is read by its own statement, ``op_blobs``: a diff alone needs it)
    blobs = [c.name for c in BASELINE_KERNELS.columns if c.name not in ("kernels", "ops")]
    assert SQL["sqlite"]["kernel_blobs"].startswith("SELECT " + ", ".join(f"baseline_kernels.{c}" for c in blobs) + " ")
    assert list(ACCEPTANCE_FIELDS) == [c.name for c in ACCEPTANCE.columns]
    assert dataclasses.is_dataclass(AcceptanceRecord)


@pytest.fixture
def both_readers(store, sqlite_store, request, tmp_path):
    """The read-only reader and the SQLAlchemy one over a copy of the store holding acceptances (on the
    backend of ``store``)."""
    from datetime import date

    from kbase.store import open_store
    from kbase.store.models import Acceptance
    from kbase.store.queries import add_acceptance
    from kbase.store.reader import EngineReader

    shutil.copy(sqlite_store[0].removeprefix("sqlite:///"), tmp_path / "acc.db")
    copy = f"sqlite:///{tmp_path / 'acc.db'}"
    with open_store(copy) as st:
        for pattern, wl, exp in (("*gemm*", "bulk", None), ("/nccl/", "bulk", date(2020, 1, 2)),
                                 ("x", "other", date(2999, 1, 1))):
            add_acceptance(st.engine, Acceptance(workload=wl, pattern=pattern, commit="c" * 40, reason="known",
                                                 author="a", expires=exp))
    if store[0].startswith("postgresql"):
        copy = request.getfixturevalue("pg_copy_of")(copy)
    st = open_store(copy)
    fast = open_reader(copy)
    assert fast is not None
    try:
        yield fast, EngineReader(st.engine)
    finally:
        fast.close()
        st.close()


def _same_records(fast, slow, names) -> None:
    assert len(fast) == len(slow)
    for f, s in zip(fast, slow):
        assert all(_same(getattr(f, k), getattr(s, k)) for k in names), [
            (k, getattr(f, k), getattr(s, k)) for k in names if not _same(getattr(f, k), getattr(s, k))]


@pytest.mark.slow
def test_compare_reads_equal_the_sqlalchemy_path(both_readers):
    """Every read of diff/gate gives the same values (types included) on both paths: records field for field,
    the kernel frames column for column with the same dtypes."""
    from datetime import date

    import numpy as np

    from kbase.errors import InputError
    from kbase.store.records import ACCEPTANCE_FIELDS

    fast, slow = both_readers
    for bid in (1, 2, 4, 5, 7):
        _same_records([fast.baseline(bid)], [slow.baseline(bid)], BASELINE_FIELDS)
    for reader in (fast, slow):
        with pytest.raises(InputError, match="no such baseline"):
            reader.baseline(99)
    commits = [b.commit for b in fast.list_baselines()]
    for wl, cs in (("bulk", commits), ("other", commits[:4]), ("bulk", []), ("nope", commits)):
        f, s = fast.baselines_at(wl, cs), slow.baselines_at(wl, cs)
        assert list(f) == list(s)
        for c in f:
            _same_records(f[c], s[c], BASELINE_FIELDS)
    fp = fast.baseline(3).fingerprint
    for kw in ({}, {"fingerprint": fp}, {"limit": 2}, {"before_id": 3}, {"commits": commits[::-1], "limit": 3},
               {"commits": commits[1:], "fingerprint": fp, "before_id": 8}, {"commits": []}, {"limit": 0},
               {"commits": commits, "limit": 0}):
        _same_records(fast.line_baselines("bulk", **kw), slow.line_baselines("bulk", **kw), BASELINE_FIELDS)
    for ids in ([1], [2], [4, 2], [7], [1, 2, 3, 4, 5, 6, 7, 8], [], [99]):
        f, s = fast.kernel_tables(ids), slow.kernel_tables(ids)
        assert f.keys() == s.keys()
        for bid in f:
            for col, value in vars(f[bid]).items():
                other = getattr(s[bid], col)
                assert (value is None) == (other is None), col
                if value is not None:
                    assert value.dtype == other.dtype and np.array_equal(value, other, equal_nan=True), col
        fl, sl = fast.level_matrix(ids), slow.level_matrix(ids)
        assert fl[:2] == sl[:2] and np.array_equal(fl[2], sl[2], equal_nan=True)
    for kw in ({}, {"workload": "bulk"}, {"workload": "other"}, {"active_on": date(2021, 1, 1)},
               {"workload": "bulk", "active_on": date(2020, 1, 2)}):
        _same_records(fast.list_acceptances(**kw), slow.list_acceptances(**kw), ACCEPTANCE_FIELDS)
    assert len(fast.list_acceptances()) == 3


def test_every_other_read_equals_the_sqlalchemy_path(both_readers):
    """The reads of history, steps, the report's trend, ``kbase top``'s identity check and the snapshot's
    duplicate check: the same values and types on both paths (with ``test_compare_reads...``, every
    statement of ``statements`` is read here on each backend)."""
    import numpy as np

    fast, slow = both_readers

    def same(f, s):
        assert f == s and [tuple(map(type, r)) for r in f] == [tuple(map(type, r)) for r in s], (f, s)

    for wl in (None, "bulk", "other", "nope"):
        assert fast.kernel_names(wl) == slow.kernel_names(wl)
    names = fast.kernel_names()[0]
    for name, kw in ((names[0], {}), (names[1], {"workload": "other"}), (names[0], {"branch": "main"}),
                     (names[2], {"workload": "bulk", "branch": ""}), ("none", {})):
        f, s = fast.kernel_history_rows(name, **kw), slow.kernel_history_rows(name, **kw)
        same([tuple(r.values()) for r in f], [tuple(r.values()) for r in s])
    assert fast.workloads() == slow.workloads() == ["bulk", "other"]
    for wl, branch in (("bulk", None), ("other", None), ("bulk", "main"), ("nope", None)):
        same([tuple(r.values()) for r in fast.trend_baselines(wl, branch)],
             [tuple(r.values()) for r in slow.trend_baselines(wl, branch)])
    for ids in ([1, 2, 3], [7], []):
        same(sorted(fast.kernel_levels(ids), key=repr), sorted(slow.kernel_levels(ids), key=repr))
    ids = fast.name_ids(names + ["none"])
    assert sorted(ids) == sorted(slow.name_ids(names + ["none"])) and len(ids) > 5  # (one name edited: its hash is stale)
    same(sorted(fast.names_by_id(ids), key=repr), sorted(slow.names_by_id(ids), key=repr))
    for bids in ([1, 2, 3, 4, 5], [6, 7, 8], [2, 7, 99], []):
        (fc, fs), (sc, ss) = fast.kernel_series(ids[:5], bids), slow.kernel_series(ids[:5], bids)
        assert fc.keys() == sc.keys() and all(fc[k].dtype == sc[k].dtype and np.array_equal(fc[k], sc[k]) for k in fc)
        assert len(fs) == len(ss) and all((a is None and b is None) or np.array_equal(a, b) for a, b in zip(fs, ss))
    for wl, kw in (("bulk", {}), ("other", {"limit": 2}), ("bulk", {"commits": ["nope"]}), ("nope", {})):
        same(fast.line_points(wl, **kw), slow.line_points(wl, **kw))
    for bid in (1, 2, 7, 99):
        same(fast.leaderboard_view(bid), slow.leaderboard_view(bid))
    b = fast.baseline(5)
    key = (b.commit, b.source_probe, b.source_size, b.source_mtime_ns, b.window_spec, b.kbase_version)
    assert fast.find_by_identity(*key) == slow.find_by_identity(*key)
    assert fast.find_by_identity(*key, workload="nope") is slow.find_by_identity(*key, workload="nope") is None
    _same_records([fast.find_duplicate(b.workload, b.commit, b.source_sha256, b.window_spec)],
                  [slow.find_duplicate(b.workload, b.commit, b.source_sha256, b.window_spec)], BASELINE_FIELDS)
    for aid in (1, 3):
        from kbase.store.records import ACCEPTANCE_FIELDS

        _same_records([fast.get_acceptance(aid)], [slow.get_acceptance(aid)], ACCEPTANCE_FIELDS)
    assert fast.get_acceptance(99) is slow.get_acceptance(99) is None


@pytest.mark.parametrize("bid", [2, 4, 5, 7])
def test_stored_capture_from_a_record(store, bid):
    """``codec.capture_from_table`` of a ``fast_read`` record equals the SQLAlchemy path's, and the
    capture of the leaderboard ``queries.load_leaderboard`` builds (pandas) from the same baseline."""
    import numpy as np

    from kbase.analysis.capture import CAPTURE_TEXT, capture_of_leaderboard
    from kbase.store import open_store, queries
    from kbase.store.reader import as_reader, load_capture

    url, _, _ = store
    fast = open_reader(url)
    assert fast is not None
    try:
        a = load_capture(fast, fast.baseline(bid))
    finally:
        fast.close()
    with open_store(url) as st:
        b = load_capture(as_reader(st.engine), as_reader(st.engine).baseline(bid))
        c = capture_of_leaderboard(queries.load_leaderboard(st.engine, bid))
    for other in (b, c):
        assert a.summary == other.summary and a.names.tolist() == other.names.tolist()
        assert all(a.text[k].tolist() == other.text[k].tolist() for k in CAPTURE_TEXT)
        for f in ("gpus", "count", "total_ns", "avg_ns", "std_ns", "iter_ns"):
            np.testing.assert_array_equal(getattr(a, f), getattr(other, f), err_msg=f)
        assert a.sketches.keys() == other.sketches.keys()
        assert all((a.sketches[k] == other.sketches[k]).all() for k in a.sketches)
