"""``kbase gate`` / ``kbase diff`` end to end, their answers and exit codes: diff of ``HEAD~1``, ``HEAD`` and one
argument; exit 0 with no regression, 1 for a kernel or total regression, 2 for a missing baseline, an unknown
revision, incomparable captures (unless allowed), far fewer iterations and usage errors (one line), 3 for an
internal error.

Runs on SQLite, and again on PostgreSQL through the fixtures of ``tests/conftest.py`` (``db`` in ``conftest.py``);
the world (``helpers/gate_world.py``): a temporary git repository with generated exports snapshotted at its commits,
each scenario its own workload."""

from __future__ import annotations

import gc
import sys

import pytest

from helpers.diff_exports import SLOW
from helpers.gate_world import _json, _kbase, _one_line_error

# The CLI runs in this process (conftest.run_kbase) and never disposes the engines it opens: on
# PostgreSQL their pooled psycopg2 connections raise ResourceWarning whenever the garbage collector
# gets to them, which can land inside a later call's captured stderr. Calls whose stderr must be
# exactly one line (``strict``) collect that garbage first.
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


# --------------------------------------------------------------------------- diff end to end


def test_diff_head1_head_and_one_arg(world, db):
    w = world
    two = w.kbase(db, "head", "diff", "HEAD~1", "HEAD", "--format", "json")
    assert two.rc == 0, two
    doc = _json(two)
    assert doc["before"]["commit"] == w.commits["c3"] and doc["after"]["commit"] == w.commits["c4"]
    assert doc["kernels"][0]["name"] == SLOW.name and doc["kernels"][0]["class"] == "regressed"
    assert [n for n in doc["notes"] if not n.startswith(("noise: ", "between-process noise: "))] == []
    one = w.kbase(db, "head", "diff", "HEAD~1", "--format", "json")
    assert one.rc == 0, one
    assert _json(one)["kernels"] == doc["kernels"]
    table = w.kbase(db, "head", "diff", "HEAD~1", "HEAD")
    assert table.rc == 0 and "regressed" in table.stdout and SLOW.short_name in table.stdout
    # the gate's default pair is HEAD~1..HEAD too
    g = w.kbase(db, "head", "gate")
    assert g.rc == 1, g
    assert "gate: FAIL (exit 1)" in g.stdout


# --------------------------------------------------------------------------- exit codes


def test_exit_0_no_regression(world, db):
    r = world.kbase(db, "pass", "gate", world.commits["c1"], world.commits["c2"])
    assert r.rc == 0, r
    assert "gate: PASS (exit 0)" in r.stdout


def test_exit_1_kernel_regression(world, db):
    c = world.commits
    r = world.kbase(db, "slow", "gate", c["c1"], c["c2"], "--format", "json")
    assert r.rc == 1, r
    doc = _json(r)
    assert doc["verdict"]["status"] == "fail" and doc["verdict"]["failing"] == [SLOW.name]
    assert doc["before"]["commit"] == c["c1"] and doc["after"]["commit"] == c["c2"]
    assert "gate: FAIL (exit 1)" in r.stderr


def test_exit_1_total_iteration_time(world, db):
    c = world.commits
    r = world.kbase(db, "total", "gate", c["c1"], c["c2"], "--max-increase-pct", "10", "--format", "json")
    assert r.rc == 1, r
    doc = _json(r)
    assert doc["counts"]["regressed"] == 0  # no single kernel over its threshold
    assert doc["verdict"]["failing"] == ["(total kernel time per iteration)"]
    assert doc["totals"]["kernel"]["regressed"] is True
    assert 3.0 < doc["totals"]["kernel"]["delta_pct"] < 5.0
    assert any(reason.startswith("total kernel time per iteration") for reason in doc["verdict"]["reasons"])
    # a looser total threshold passes
    r = world.kbase(db, "total", "gate", c["c1"], c["c2"], "--max-increase-pct", "10",
                    "--total-increase-pct", "6")
    assert r.rc == 0, r


def test_exit_2_missing_baseline_and_unknown_revision(world, db):
    c = world.commits
    # c0 has no baseline and no ancestor to walk back to
    r = world.kbase(db, "pass", "gate", c["c0"], c["c2"], strict=True)
    assert r.rc == 2, r
    _one_line_error(r)
    assert "no baseline" in r.stderr and c["c0"][:12] in r.stderr
    # a workload with no baseline anywhere
    r = _kbase("gate", c["c1"], c["c2"], "--db", db, "--repo", world.repo, "--name", "never-stored",
               strict=True)
    assert r.rc == 2, r
    _one_line_error(r)
    r = world.kbase(db, "pass", "gate", "no-such-branch", c["c2"], strict=True)
    assert r.rc == 2, r
    _one_line_error(r)
    assert "unknown git revision 'no-such-branch'" in r.stderr
    r = world.kbase(db, "pass", "diff", "@999999", c["c2"])
    assert r.rc == 2 and "@999999" in r.stderr, r


@pytest.mark.parametrize("scenario,what", [("gpus", "GPU count differs"), ("window", "window spec differs")])
def test_exit_2_incomparable_then_allowed(world, db, scenario, what):
    c = world.commits
    r = world.kbase(db, scenario, "gate", c["c1"], c["c2"], "--format", "json")
    assert r.rc == 2, r
    doc = _json(r)
    assert doc["comparable"] is False and any(m.startswith(what) for m in doc["mismatches"])
    assert doc["verdict"]["status"] == "incomparable"
    assert "INCOMPARABLE" in r.stderr
    table = world.kbase(db, scenario, "gate", c["c1"], c["c2"])
    lines = table.stdout.splitlines()  # the verdict and its reason first, then no kernel row it did not judge
    assert table.rc == 2 and lines[0] == "gate: INCOMPARABLE (exit 2)" and lines[1].startswith(f"  incomparable: {what}")
    assert "Kernel diff" not in table.stdout
    r = world.kbase(db, scenario, "gate", c["c1"], c["c2"], "--allow-incomparable", "--format", "json")
    assert r.rc == 0, r
    assert _json(r)["verdict"]["status"] == "pass"


def test_exit_2_far_fewer_iterations(world, db):
    c = world.commits
    r = world.kbase(db, "fewer", "gate", c["c1"], c["c2"], "--format", "json")
    assert r.rc == 2, r
    assert any("far fewer iterations" in m for m in _json(r)["mismatches"])


@pytest.mark.slow
def test_exit_2_usage_errors_one_line(world, db):
    c = world.commits
    for args in (("--format", "xml"), ("--new-kernel", "maybe"), ("--alpha", "2"),
                 ("--ignore", "/[unclosed/"), ("--no-such-flag",)):
        r = world.kbase(db, "pass", "gate", c["c1"], c["c2"], *args, strict=True)
        assert r.rc == 2, r
        _one_line_error(r)


def test_exit_3_internal_error_in_process(monkeypatch, capsys, tmp_path):
    import kbase.cli
    import kbase.comparison.resolve

    def boom(*_a, **_k):
        raise RuntimeError("simulated failure")

    gc.collect()  # see _kbase: no stray ResourceWarning inside the captured stderr
    monkeypatch.delenv("KBASE_DEBUG", raising=False)
    monkeypatch.setattr(kbase.comparison.resolve, "read_stored", boom)
    from kbase.store.engine import open_store

    open_store(f"sqlite:///{tmp_path / 'x.db'}").close()  # read-only commands need an existing store
    monkeypatch.setattr(sys, "argv",
                        ["kbase", "gate", "HEAD~1", "HEAD", "--db", f"sqlite:///{tmp_path / 'x.db'}"])
    with pytest.raises(SystemExit) as exc:
        kbase.cli.main()
    assert exc.value.code == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("kbase: internal error: RuntimeError: simulated failure"), err
