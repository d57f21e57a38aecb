"""``kbase gate`` / ``kbase accept`` end to end, beyond the exit codes: warn-only, the policy shown and overridden by
``pyproject.toml`` (a malformed one is exit 2), the ancestry walk (and ``--strict``), the merge-base of ``--base-
ref``, acceptances (and their expiry, and the configured workload), the JUnit and step-summary report files, a
baseline diffed with itself and repeat captures pooled.

Runs on SQLite, and again on PostgreSQL through the fixtures of ``tests/conftest.py`` (``db`` in ``conftest.py``);
the world (``helpers/gate_world.py``): a temporary git repository with generated exports snapshotted at its commits,
each scenario its own workload."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers.diff_exports import SLOW
from helpers.gate_world import _json, _kbase, _one_line_error

# The CLI runs in this process (conftest.run_kbase) and never disposes the engines it opens: on
# PostgreSQL their pooled psycopg2 connections raise ResourceWarning whenever the garbage collector
# gets to them, which can land inside a later call's captured stderr. Calls whose stderr must be
# exactly one line (``strict``) collect that garbage first.
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


# --------------------------------------------------------------------------- warn-only, policy, config


def test_warn_only_reports_but_exits_0(world, db):
    c = world.commits
    r = world.kbase(db, "slow", "gate", c["c1"], c["c2"], "--warn-only")
    assert r.rc == 0, r
    assert "FAIL (warn-only: exit 0)" in r.stdout
    assert "regression:" in r.stdout and SLOW.short_name in r.stdout


def test_show_policy(world):
    import tomllib

    from kbase.policy import THRESHOLD_KEYS, Policy

    r = _kbase("gate", "--show-policy", "--repo", world.repo)
    assert r.rc == 0, r
    pol = tomllib.loads(r.stdout)["tool"]["kbase"]["gate"]  # TOML that pastes into [tool.kbase.gate]
    assert set(THRESHOLD_KEYS) <= set(pol) and "new_kernel" in pol and "ignore" in pol
    assert pol == {k: v for k, v in Policy().as_dict().items() if k != "kernels"}
    r = _kbase("gate", "--show-policy", "--repo", world.repo, "--max-increase-pct", "7.5",
               "--ignore", "*memcpy*", "--new-kernel", "warn")
    pol = tomllib.loads(r.stdout)["tool"]["kbase"]["gate"]
    assert pol["max_increase_pct"] == 7.5 and pol["ignore"] == ["*memcpy*"] and pol["new_kernel"] == "warn"


@pytest.fixture
def cfg_repo(world, tmp_path):
    """A clone of the world repository (same commits) whose working tree gets a pyproject.toml."""
    import git

    clone = tmp_path / "clone"
    git.Repo.clone_from(str(world.repo), str(clone))

    def write(text: str) -> Path:
        (clone / "pyproject.toml").write_text(text)
        return clone

    return write


@pytest.mark.parametrize("toml", [
    "[tool.kbase.gate]\nmax_increase_pct = 50\n",
    '[tool.kbase.gate.kernels."*flash_fwd*"]\nmax_increase_pct = 50.0\n',
    '[tool.kbase.gate]\nignore = ["*flash_fwd*"]\n',
    '[tool.kbase.gate]\nignore = ["/^void flash::flash_fwd_kernel</"]\n',
], ids=["max_increase_pct", "per-kernel", "ignore-glob", "ignore-regex"])
def test_pyproject_gate_overrides(world, db, cfg_repo, toml):
    c = world.commits
    world.ensure(db, "slow")
    clone = cfg_repo(toml)
    args = ("gate", c["c1"], c["c2"], "--db", db, "--name", world.workload("slow"), "--format", "json")
    r = _kbase(*args, "--repo", clone)
    assert r.rc == 0, r
    doc = _json(r)
    row = next(k for k in doc["kernels"] if k["name"] == SLOW.name)
    if "ignore" in toml:
        assert row["class"] == "regressed" and row["ignored"] is True and row["gated"] is False
    else:
        assert row["class"] == "within_noise"
    # flags override the file
    if "max_increase_pct = 50\n" in toml:
        r = _kbase(*args, "--repo", clone, "--max-increase-pct", "5")
        assert r.rc == 1, r


@pytest.mark.parametrize("toml", [
    '[tool.kbase.gate]\nmax_increase_pct = "lots"\n',
    "[tool.kbase.gate]\nalpha = 1.5\n",
    "[tool.kbase.gate]\nno_such_threshold = 1\n",
    '[tool.kbase.gate]\nignore = "*memcpy*"\n',
    '[tool.kbase.gate.kernels."*x*"]\nnew_kernel = "warn"\n',
    "[tool.kbase.gate\n",
], ids=["string", "alpha-range", "unknown-key", "ignore-not-list", "kernel-key", "bad-toml"])
def test_malformed_gate_config_exit_2(world, cfg_repo, toml):
    c = world.commits
    clone = cfg_repo(toml)
    r = _kbase("gate", c["c1"], c["c2"], "--repo", clone, "--db", f"sqlite:///{clone / 'unused.db'}",
               strict=True)
    assert r.rc == 2, r
    _one_line_error(r)
    assert "pyproject.toml" in r.stderr or "[tool.kbase.gate]" in r.stderr


# --------------------------------------------------------------------------- ancestry and merge-base


def test_ancestry_walk_and_strict(world, db):
    c = world.commits
    # HEAD (c4) has no baseline of this workload: c2 is the nearest, 2 commits back
    r = world.kbase(db, "pass", "gate", c["c1"], "HEAD", "--format", "json")
    assert r.rc == 0, r
    doc = _json(r)
    assert doc["after"]["commit"] == c["c2"]
    note = next(n for n in doc["notes"] if n.startswith("HEAD:"))
    assert c["c4"][:12] in note and c["c2"][:12] in note and "2 commit(s) back" in note
    table = world.kbase(db, "pass", "diff", c["c1"], "HEAD")
    assert "note: HEAD: no baseline at" in table.stdout and "2 commit(s) back" in table.stdout
    r = world.kbase(db, "pass", "gate", c["c1"], "HEAD", "--strict", strict=True)
    assert r.rc == 2, r
    _one_line_error(r)
    assert "--strict" in r.stderr and "2 commit(s) back" in r.stderr


def test_base_ref_uses_merge_base(world, db):
    c = world.commits
    # against main's tip the feature's SLOW kernel looks +11% (main made it faster after branching)
    r = world.kbase(db, "branch", "gate", "main", "feature", "--format", "json")
    assert r.rc == 1, r
    assert _json(r)["verdict"]["failing"] == [SLOW.name]
    # a pull request is judged against the merge-base (c2), where the feature changed nothing
    r = world.kbase(db, "branch", "gate", "feature", "--base-ref", "main", "--format", "json")
    assert r.rc == 0, r
    doc = _json(r)
    assert doc["before"]["commit"] == c["c2"] and doc["after"]["commit"] == c["f1"]
    assert any(n == f"base ref main: comparing against merge-base {c['c2'][:12]}" for n in doc["notes"])
    assert doc["counts"]["regressed"] == 0


# --------------------------------------------------------------------------- acceptances


@pytest.mark.slow
def test_accept_then_expired(world, db):
    c = world.commits
    args = ("gate", c["c1"], c["c2"], "--format", "json")
    assert world.kbase(db, "accept", *args).rc == 1
    # an acknowledgement that has already expired does not help
    r = world.kbase(db, "accept", "accept", "*flash_fwd*", "--rev", c["c2"], "--reason", "old",
                    "--expires", "2000-01-01")
    assert r.rc == 0, r
    r = world.kbase(db, "accept", *args)
    assert r.rc == 1, r
    assert _json(r)["verdict"]["accepted"] == []
    # an acknowledgement for a commit outside the compared range does not either
    r = world.kbase(db, "accept", "accept", "*flash_fwd*", "--rev", c["c4"], "--reason", "later commit")
    assert r.rc == 0, r
    assert world.kbase(db, "accept", *args).rc == 1
    # a live one for the commit that introduced it: accepted, not failing
    r = world.kbase(db, "accept", "accept", "/flash_fwd_kernel/", "--rev", c["c2"],
                    "--reason", "new causal mask, +10% accepted", "--expires", "2999-12-31")
    assert r.rc == 0, r
    assert "accepted #" in r.stderr
    r = world.kbase(db, "accept", *args)
    assert r.rc == 0, r
    v = _json(r)["verdict"]
    assert v["status"] == "pass" and v["failing"] == []
    assert [a["name"] for a in v["accepted"]] == [SLOW.name]
    assert v["accepted"][0]["reason"] == "new causal mask, +10% accepted"
    assert v["accepted"][0]["expires"] == "2999-12-31" and v["accepted"][0]["commit"] == c["c2"]
    table = world.kbase(db, "accept", "gate", c["c1"], c["c2"])
    assert table.rc == 0 and "accepted:" in table.stdout and "new causal mask" in table.stdout
    # bad input
    for bad in (("--expires", "tomorrow"), ("--reason", " "), ("--rev", "no-such-rev")):
        argv = ["accept", "*x*", "--rev", c["c2"], "--reason", "r", *bad]
        r = world.kbase(db, "accept", *argv, strict=True)
        assert r.rc == 2, r
        _one_line_error(r)


def test_accept_uses_the_configured_workload(world, db, cfg_repo):
    """With ``[tool.kbase] name`` set, accept (like snapshot, diff and gate) needs no --name."""
    c = world.commits
    world.ensure(db, "accept_cfg")
    clone = cfg_repo(f'[tool.kbase]\nname = "{world.workload("accept_cfg")}"\n')
    gate = ("gate", c["c1"], c["c2"], "--db", db, "--repo", clone, "--format", "json")
    assert _kbase(*gate).rc == 1
    r = _kbase("accept", "*flash_fwd*", "--rev", c["c2"], "--reason", "known", "--db", db, "--repo", clone)
    assert r.rc == 0, r
    r = _kbase(*gate)
    assert r.rc == 0, r
    assert [a["name"] for a in _json(r)["verdict"]["accepted"]] == [SLOW.name]


# --------------------------------------------------------------------------- report files


def test_junit_output_and_step_summary(world, db, tmp_path, monkeypatch):
    c = world.commits
    junit, output = tmp_path / "kbase-junit.xml", tmp_path / "kbase-report.json"
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    r = world.kbase(db, "slow", "gate", c["c1"], c["c2"], "--junit", junit, "--output", output)
    assert r.rc == 1, r
    suite = ET.parse(junit).getroot()
    assert suite.tag == "testsuite" and suite.get("failures") == "1"
    failed = [tc for tc in suite.iter("testcase") if tc.find("failure") is not None]
    assert [tc.get("name") for tc in failed] == [SLOW.name]
    assert "slower per launch" in failed[0].find("failure").text
    doc = json.loads(output.read_text())
    assert doc["schema"] == "kbase.diff/4" and doc["verdict"]["code"] == 1
    md = summary.read_text()
    assert md.startswith("earlier step\n## kbase kernel diff")
    assert "**gate: FAIL (exit 1)**" in md and "| class | kernel |" in md
    # a passing gate writes a JUnit file without failures; an incomparable one an error element
    r = world.kbase(db, "pass", "gate", c["c1"], c["c2"], "--junit", junit)
    assert r.rc == 0
    suite = ET.parse(junit).getroot()
    assert suite.get("failures") == "0" and suite.get("errors") == "0"
    r = world.kbase(db, "gpus", "gate", c["c1"], c["c2"], "--junit", junit)
    assert r.rc == 2
    assert ET.parse(junit).getroot().get("errors") == "1"
    assert summary.read_text().count("## kbase kernel diff") == 3


def test_total_regression_in_junit(world, db, tmp_path):
    c = world.commits
    junit = tmp_path / "j.xml"
    r = world.kbase(db, "total", "gate", c["c1"], c["c2"], "--max-increase-pct", "10", "--junit", junit)
    assert r.rc == 1, r
    cases = {tc.get("name"): tc for tc in ET.parse(junit).getroot().iter("testcase")}
    assert cases["total kernel time per iteration"].find("failure") is not None


# --------------------------------------------------------------------------- baseline ids, pooling


def test_baseline_diffed_with_itself(world, db):
    ids = world.ensure(db, "slow")
    bid = ids["c2"][0]
    r = world.kbase(db, "slow", "gate", f"@{bid}", f"@{bid}", "--format", "json")
    # issue 12: one baseline on both sides is refused (exit 2, the reason on one line, nothing on stdout)
    assert r.rc == 2 and r.stdout == "" and f"resolve to the same baseline @{bid}" in r.stderr, r


def test_repeat_captures_are_pooled(world, db):
    c = world.commits
    ids = world.ensure(db, "pool")
    r = world.kbase(db, "pool", "diff", c["c1"], f"@{ids['c1'][0]}", "--format", "json")
    assert r.rc == 0, r
    doc = _json(r)
    assert doc["before"]["baselines"] == ids["c1"] and len(ids["c1"]) == 2
    assert doc["before"]["units"] == 2 * doc["after"]["units"]
    assert any("pooled 2 repeat captures" in n for n in doc["notes"])
