"""Kernel time by op in the store (migration 0010: ``op_name``, and ``baseline_kernels.ops``, one blob per
baseline, ``store.op_blobs``): stored with the baseline, read back by every read path on both backends as the
comparison pooled it from the file, removed with the baseline; a baseline without it (stored before 0010)
compares with the library-swap rule."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

import kbase
from kbase.comparison.diff import compute_diff
from kbase.store import open_store
from kbase.store.read.reader import load_capture

from helpers.shared import REPO

DATA = REPO / "tests" / "data" / "kineto"
JAN = [DATA / f"v100_resnet50_w{n}_jan2021.pt.trace.json.gz" for n in (0, 4)]
REV = ["1" * 40, "2" * 40]


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    d = tmp_path_factory.mktemp("ops")
    s = kbase.Settings.load(db=f"sqlite:///{d / 'kbase.db'}", name="resnet")
    ids = [kbase.snapshot(p, s, rev=rev, no_git=True).baseline.id for p, rev in zip(JAN, REV)]
    return s, d / "kbase.db", ids


def _pairs(reader, baseline_id):
    t = reader.kernel_table(baseline_id)
    names = reader.names(t.name_id.tolist())
    return t, reader.op_pairs(baseline_id, t, [names[i][0] for i in t.name_id.tolist()])


def test_stored_pairs_split_every_kernel_exactly(stored):
    from kbase.store.codec.id_lists import ids_of
    from kbase.store.codec.packed import Packed

    s, db, ids = stored
    with open_store(s) as st:
        reader = st.reader
        t, pairs = _pairs(reader, ids[0])
        by_kernel: dict[str, float] = {}
        for k, total in zip(pairs.kernel.tolist(), pairs.total_ns.tolist()):
            by_kernel[k] = by_kernel.get(k, 0.0) + total
        names = reader.names(t.name_id.tolist())
        assert by_kernel == {names[i][0]: float(x) for i, x in zip(t.name_id.tolist(), t.total_ns.tolist())}
        assert "aten::cudnn_convolution_backward_input" in pairs.names.tolist()
        used = set()
        for bid in ids:
            used |= set(ids_of(reader.rows_in("op_blobs", {}, "ids", [bid])[0][2]))
    con = sqlite3.connect(db)
    # op names are stored once each, shared by both baselines
    assert con.execute("SELECT COUNT(*) FROM op_name").fetchone()[0] == len(used)
    # a kernel serving one op is stored as its row and op alone; the kernels serving several carry their own
    blob = con.execute("SELECT ops FROM baseline_kernels WHERE baseline_id = ?", (ids[0],)).fetchone()[0]
    explicit = Packed(blob).ints("explicit")
    assert 0 < sum(explicit) < len(explicit) and len(explicit) == len(pairs)


def _by_pair(ops):
    return {(ops.op_of(i), k): (int(c), float(t), np.asarray(x, dtype=np.float64))
            for i, (k, c, t, x) in enumerate(zip(ops.kernel.tolist(), ops.count.tolist(), ops.total_ns.tolist(),
                                                 ops.iter_ns.dense()))}


def _same_pairs(got, want, label):
    assert got.keys() == want.keys(), label
    for key, (count, total, ns) in want.items():
        g = got[key]
        assert (g[0], g[1]) == (count, total), (label, key)
        # per-iteration ns as 10-bit mantissa codes: <= 2^-11 relative (docs/store-format.md)
        np.testing.assert_allclose(g[2], ns, rtol=2.0**-10, atol=0.5, err_msg=f"{label} {key}")


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_stored_ops_read_back_as_computed(stored, backend, request):
    """The capture read from the store (SQLite and PostgreSQL) holds the same (op, kernel) pairs, launches and
    totals as the one computed from the file, and the per-iteration samples within their codes' error."""
    s, db, ids = stored
    url = f"sqlite:///{db}" if backend == "sqlite" else request.getfixturevalue("pg_copy_of")(f"sqlite:///{db}")
    lb = kbase.leaderboard(kbase.window(kbase.read(JAN[0], s), s), sketches=True)
    want = _by_pair(lb.ops)
    with open_store(url, readonly=True) as st:
        cap = load_capture(st.reader, st.reader.baseline(ids[0]))
        _same_pairs(_by_pair(cap.ops), want, backend)
        levels = st.reader.op_levels(ids)
    con = sqlite3.connect(db)
    with_ops = {r[0] for r in con.execute("SELECT baseline_id FROM baseline_kernels WHERE ops IS NOT NULL")}
    con.close()
    assert {b for b, _, _, _ in levels} == with_ops & set(ids) != set()
    with open_store(s, readonly=True) as ref:  # history noise's op levels: the same on both backends
        assert sorted(levels) == sorted(ref.reader.op_levels(ids))


def test_a_stored_pair_is_judged_by_op_and_an_older_baseline_by_the_library_rule(stored, tmp_path):
    s, db, ids = stored
    g = kbase.gate(f"@{ids[0]}", f"@{ids[1]}", s)
    assert g.verdict.code == 0 and g.comparison.result.ops is not None
    # the same store with the first baseline's op data gone: as stored before migration 0010
    old = tmp_path / "old.db"
    old.write_bytes(db.read_bytes())
    con = sqlite3.connect(old)
    con.execute("UPDATE baseline_kernels SET ops = NULL WHERE baseline_id = ?", (ids[0],))
    con.commit()
    con.close()
    s_old = kbase.Settings.load(db=f"sqlite:///{old}", name="resnet")
    g = kbase.gate(f"@{ids[0]}", f"@{ids[1]}", s_old)
    assert g.comparison.result.ops is None
    assert any(n.startswith("algorithm swap: ") for n in g.comparison.result.notes)


def test_removing_a_baseline_removes_its_op_data(stored, tmp_path):
    s, db, ids = stored
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())
    s_copy = kbase.Settings.load(db=f"sqlite:///{copy}", name="resnet")
    kbase.remove(ids[1], s_copy)
    con = sqlite3.connect(copy)
    assert con.execute("SELECT COUNT(*) FROM baseline_kernels WHERE baseline_id = ?", (ids[1],)).fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM baseline_kernels WHERE baseline_id = ? AND ops IS NOT NULL",
                       (ids[0],)).fetchone()[0] == 1


def test_history_noise_per_op_comes_from_the_stored_ops(tmp_path):
    """Past baselines of the base line give each op its own run-to-run sd (``HistoryNoise.ops``)."""
    import git

    from kbase.comparison.reads import noise_from_history
    from kbase.comparison.resolve import parse_ref, resolve_stored

    repo = git.Repo.init(tmp_path / "repo", initial_branch="main")
    actor = git.Actor("t", "t@kbase.invalid")
    s = kbase.Settings.load(repo=tmp_path / "repo", db=f"sqlite:///{tmp_path / 's.db'}", name="resnet")
    shas = []
    for i, path in enumerate([*JAN, *JAN, *JAN]):
        (tmp_path / "repo" / "v").write_text(str(i))
        repo.index.add(["v"])
        shas.append(repo.index.commit(f"c{i}", author=actor, committer=actor).hexsha)
        kbase.snapshot(path, s, rev=shas[-1])
    with open_store(s) as st:
        first = resolve_stored(parse_ref(shas[-2]), st.reader, workload="resnet", repo=s.repo)
        second = resolve_stored(parse_ref(shas[-1]), st.reader, workload="resnet", repo=s.repo)
        noise, notes = noise_from_history(st.reader, s.policy, s.repo, first, second)
    assert noise is not None and np.isfinite(noise.ops["aten::cudnn_convolution"])
    assert noise.op_groups["aten::cudnn_convolution"] == noise.ops["aten::cudnn_convolution"]
    result = compute_diff(first.side, second.side, s.policy, history=noise)
    conv = next(r for r in result.ops.records() if r["op"] == "aten::cudnn_convolution")
    assert conv["noise_source"] == "history"


def test_the_report_groups_the_leaderboard_by_op_with_a_drill_down(tmp_path):
    """The report's leaderboard page (``kbase.report``) lists the ops of the baseline, each opening onto its
    kernels; the figures are ``kbase top --by op``'s."""
    import git

    repo = git.Repo.init(tmp_path / "repo", initial_branch="main")
    actor = git.Actor("t", "t@kbase.invalid")
    s = kbase.Settings.load(repo=tmp_path / "repo", db=f"sqlite:///{tmp_path / 's.db'}", name="resnet")
    for i, path in enumerate(JAN):
        (tmp_path / "repo" / "v").write_text(str(i))
        repo.index.add(["v"])
        kbase.snapshot(path, s, rev=repo.index.commit(f"c{i}", author=actor, committer=actor).hexsha)
    data = kbase.report_data(s)
    ops = data.leaderboard.ops
    top = kbase.top(JAN[1], s, ops=True)
    from kbase.render.ops import op_rows

    want = op_rows(top)
    assert [o.op for o in ops] == [o["op"] for o in want]
    assert [len(o.kernels) for o in ops] == [o["kernels"] for o in want]
    kbase.report(tmp_path / "site", s)
    html = (tmp_path / "site" / "leaderboard.html").read_text()
    assert "By op" in html and html.count("<details>") == len(ops)
    assert "aten::cudnn_convolution_backward_input" in html and "scalePackedTensor_kernel" in html


def test_a_0009_store_upgrades_to_0010_without_op_data_and_stores_ops_from_then_on(stored, tmp_path):
    """Migration 0010 on a store holding 0009's data: its baselines keep every kernel table and have no op
    information (the library-swap rule compares them); a snapshot taken afterwards stores its ops."""
    from kbase.store import engine as kdb

    from helpers.kernel_tables import downgrade

    s, db, ids = stored
    copy = tmp_path / "at0009.db"
    copy.write_bytes(db.read_bytes())
    url = f"sqlite:///{copy}"
    engine = kdb.make_engine(url)
    downgrade(engine, url, "0009")
    with engine.connect() as conn:
        cols = [r[1] for r in conn.exec_driver_sql("PRAGMA table_info(baseline_kernels)")]
        tables = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "ops" not in cols and "op_name" not in tables
    engine.dispose()
    s2 = kbase.Settings.load(db=url, name="resnet")
    with open_store(s2) as st:  # opened by this kbase: upgraded to head
        assert kdb.schema_state(st.engine, url)[0] == kdb.head_revision()
        reader = st.reader
        assert all(_pairs(reader, bid)[1] is None for bid in ids)
    g = kbase.gate(f"@{ids[0]}", f"@{ids[1]}", s2)
    assert g.comparison.result.ops is None and g.verdict.code == 0
    new = kbase.snapshot(JAN[0], s2, rev="3" * 40, no_git=True).baseline.id
    with open_store(s2) as st:
        assert _pairs(st.reader, new)[1] is not None


def test_op_data_of_another_layout_is_refused_in_one_line(stored, tmp_path):
    from kbase.store.codec.packed import Packed
    from kbase.store.codec.packing import pack

    from helpers.cli import run_kbase

    s, db, ids = stored
    copy = tmp_path / "layout.db"
    copy.write_bytes(db.read_bytes())
    con = sqlite3.connect(copy)
    blob = con.execute("SELECT ops FROM baseline_kernels WHERE baseline_id = ?", (ids[1],)).fetchone()[0]
    p = Packed(blob)
    columns = {name: (p.array(name, 0), {}) for name in p.names}
    con.execute("UPDATE baseline_kernels SET ops = ? WHERE baseline_id = ?",
                (pack(p.rows, columns, {**p.meta, "layout": 99}), ids[1]))
    con.commit()
    con.close()
    r = run_kbase("diff", f"@{ids[0]}", f"@{ids[1]}", "--db", f"sqlite:///{copy}", "--name", "resnet")
    assert r.rc == 2 and r.stderr.count("\n") == 1 and "op data of layout 99" in r.stderr, r
