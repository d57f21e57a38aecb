"""Kernel time by op in the store (migration 0010): stored with the baseline, read back by both read paths
as the comparison pooled it from the file, removed with the baseline; a baseline without it (stored before
0010) compares with the library-swap rule."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest

import kbase
from kbase.comparison.diff import compute_diff
from kbase.store import open_store
from kbase.store.reader import EngineReader, load_capture

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


def test_op_rows_split_every_kernel_exactly(stored):
    s, db, ids = stored
    con = sqlite3.connect(db)
    by_kernel = dict(con.execute("SELECT name_id, SUM(total_ns) FROM baseline_kernel_op WHERE baseline_id = ? "
                                 "GROUP BY name_id", (ids[0],)).fetchall())
    kernels = dict(con.execute("SELECT name_id, total_ns FROM baseline_kernel WHERE baseline_id = ?",
                               (ids[0],)).fetchall())
    assert by_kernel == kernels
    ops = [r[0] for r in con.execute("SELECT DISTINCT o.key FROM baseline_kernel_op k JOIN op_name o "
                                     "ON o.id = k.op_id WHERE baseline_id = ?", (ids[0],))]
    assert "aten::cudnn_convolution_backward_input" in ops
    # op names are stored once each, shared by both baselines
    assert con.execute("SELECT COUNT(*) FROM op_name").fetchone()[0] == con.execute(
        "SELECT COUNT(DISTINCT op_id) FROM baseline_kernel_op WHERE op_id IS NOT NULL").fetchone()[0]


def test_stored_ops_read_back_as_computed(stored):
    """The capture read from the store (SQLAlchemy and the read-only SQLite path) holds the same (op, kernel)
    pairs, launches, totals and per-iteration samples as the one computed from the file."""
    from kbase.store.sqlite_read import open_reader

    s, db, ids = stored
    lb = kbase.leaderboard(kbase.window(kbase.read(JAN[0], s), s), sketches=True)
    want = {(lb.ops.op_of(i), k): (int(c), float(t), tuple(np.round(x, -1)))
            for i, (k, c, t, x) in enumerate(zip(lb.ops.kernel.tolist(), lb.ops.count.tolist(),
                                                   lb.ops.total_ns.tolist(), lb.ops.iter_ns))}
    with open_store(s) as st:
        fast = open_reader(f"sqlite:///{db}")
        assert fast is not None  # a store at the head schema holding only kbase's tables
        readers = [EngineReader(st.engine), fast]
        for reader in readers:
            cap = load_capture(reader, reader.baseline(ids[0]))
            got = {(cap.ops.op_of(i), k): (int(c), float(t), tuple(np.round(x, -1)))
                   for i, (k, c, t, x) in enumerate(zip(cap.ops.kernel.tolist(), cap.ops.count.tolist(),
                                                          cap.ops.total_ns.tolist(), cap.ops.iter_ns))}
            assert got == want, type(reader).__name__


def test_a_stored_pair_is_judged_by_op_and_an_older_baseline_by_the_library_rule(stored, tmp_path):
    s, db, ids = stored
    g = kbase.gate(f"@{ids[0]}", f"@{ids[1]}", s)
    assert g.verdict.code == 0 and g.comparison.result.ops is not None
    # the same store with the first baseline's op rows gone: as stored before migration 0010
    old = tmp_path / "old.db"
    old.write_bytes(db.read_bytes())
    con = sqlite3.connect(old)
    con.execute("DELETE FROM baseline_kernel_op WHERE baseline_id = ?", (ids[0],))
    con.commit()
    con.close()
    s_old = kbase.Settings.load(db=f"sqlite:///{old}", name="resnet")
    g = kbase.gate(f"@{ids[0]}", f"@{ids[1]}", s_old)
    assert g.comparison.result.ops is None
    assert any(n.startswith("algorithm swap: ") for n in g.comparison.result.notes)


def test_removing_a_baseline_removes_its_op_rows(stored, tmp_path):
    s, db, ids = stored
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())
    s_copy = kbase.Settings.load(db=f"sqlite:///{copy}", name="resnet")
    kbase.remove(ids[1], s_copy)
    con = sqlite3.connect(copy)
    assert con.execute("SELECT COUNT(*) FROM baseline_kernel_op WHERE baseline_id = ?", (ids[1],)).fetchone()[0] == 0
    assert con.execute("SELECT COUNT(*) FROM baseline_kernel_op WHERE baseline_id = ?", (ids[0],)).fetchone()[0] > 0


def test_history_noise_per_op_comes_from_the_stored_ops(tmp_path):
    """Past baselines of the base line give each op its own run-to-run sd (``HistoryNoise.ops``)."""
    import git

    from kbase.comparison.history import noise_from_history
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
        first = resolve_stored(parse_ref(shas[-2]), st.engine, workload="resnet", repo=s.repo)
        second = resolve_stored(parse_ref(shas[-1]), st.engine, workload="resnet", repo=s.repo)
        noise, notes = noise_from_history(st.engine, s.policy, s.repo, first, second)
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
