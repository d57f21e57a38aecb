"""What lives only in the kernel blobs read equal on SQLite and PostgreSQL (one executor, the same answers): the
blob reads, and ``show`` / ``list`` / ``history`` output byte for byte."""

from __future__ import annotations

import json

import pytest

from helpers.cli import run_kbase
from helpers.store_reads import (
    plain,
    same,
)

# ------------------------------------------------------------------ the two backends: one executor, the same answers


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
            assert all(same(r[k], q[k]) for r, q in zip(x.rows, y.rows) for k in r)
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
