"""``kbase gate`` / ``kbase diff`` / ``kbase accept`` end to end: a temporary git repository, generated
exports snapshotted at its commits, every exit code, the policy file, ancestry walk, merge-base,
acceptances and the report files.

Runs on SQLite, and again on PostgreSQL through the fixtures of ``tests/conftest.py``: one database
per module on the ``pg_url`` server, else ``pg_db_url`` (a fresh database per test); the PostgreSQL
cases skip where those fixtures or a server are missing.

Repository (first-parent history of ``main``; HEAD stays on ``main``)::

    c0 ── c1 ── c2 ── c3 ── c4   main (HEAD)
                  └── f1         feature

Each scenario is its own workload (``--name``) with baselines at some of these commits, so the
scenarios never see each other's baselines or acceptances.
"""

from __future__ import annotations

import gc
import json
import sys
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.diff_exports import SLOW, Exports, shared_export_dir
from helpers.shared import REPO

REPO_ROOT = REPO

# The CLI runs in this process (conftest.run_kbase) and never disposes the engines it opens: on
# PostgreSQL their pooled psycopg connections raise ResourceWarning whenever the garbage collector
# gets to them, which can land inside a later call's captured stderr. Calls whose stderr must be
# exactly one line (``strict``) collect that garbage first.
pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")
_PG_USED: list[bool] = []


def _kbase(*args, strict: bool = False) -> CliResult:  # noqa: F821
    if strict and _PG_USED:
        gc.collect()
    return run_kbase(*args)


def _compute_kernel_names() -> list[str]:
    from kbase.analysis.classify import category
    from kbase.synth.generate import default_kernel_mix

    return [k.name for k in default_kernel_mix() if category(k.name) == "compute"]


GATE_RECIPES: dict[str, dict] = {
    "base": dict(seed=1),
    "same": dict(seed=2),
    "seed3": dict(seed=3),
    "slow": dict(seed=2, slowdown={SLOW.name: 1.10}),
    # SLOW 10% faster per launch: main moved on after the feature branched off
    "faster": dict(seed=3, slowdown={SLOW.name: 0.90}),
    # every compute kernel +5% per launch: each under a 10% per-kernel threshold, the kernel total
    # (compute is ~76% of kernel time) about +3.8%, over the 3% total threshold
    "total": dict(seed=2, slowdown={n: 1.05 for n in _compute_kernel_names()}),
    "one_gpu": dict(seed=2, n_gpus=1),
    "fewer": dict(seed=2, iterations=4),  # 3 iterations used vs 7
}

# scenario -> [(commit key, export key, extra snapshot args)]
SCENARIOS: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    "pass": [("c1", "base", ()), ("c2", "same", ())],
    "slow": [("c1", "base", ()), ("c2", "slow", ())],
    "accept": [("c1", "base", ()), ("c2", "slow", ())],
    "accept_cfg": [("c1", "base", ()), ("c2", "slow", ())],
    "total": [("c1", "base", ()), ("c2", "total", ())],
    "gpus": [("c1", "base", ()), ("c2", "one_gpu", ())],
    "window": [("c1", "base", ("--warmup", "2")), ("c2", "same", ())],
    "fewer": [("c1", "base", ()), ("c2", "fewer", ())],
    "head": [("c3", "base", ()), ("c4", "slow", ())],
    "branch": [("c2", "base", ()), ("c4", "faster", ()), ("f1", "seed3", ())],
    "pool": [("c1", "base", ()), ("c1", "same", ())],
}


@dataclass
class World:
    repo: Path
    commits: dict[str, str]
    exports: Exports
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    done: dict = field(default_factory=dict)  # (db url, scenario) -> {commit key: [baseline ids]}

    def workload(self, scenario: str) -> str:
        return f"{scenario}-{self.run_id}"

    def ensure(self, db: str, scenario: str) -> dict[str, list[int]]:
        """Snapshot the scenario's exports (once per database) with ``kbase snapshot``."""
        key = (db, scenario)
        if key not in self.done:
            ids: dict[str, list[int]] = {}
            for commit, export, extra in SCENARIOS[scenario]:
                r = _kbase("snapshot", self.exports.path(export), "--db", db, "--repo", self.repo,
                              "--name", self.workload(scenario), "--rev", self.commits[commit],
                              "--format", "json", "--limit", "1", *extra)
                assert r.rc == 0, r
                doc = json.loads(r.stdout)
                assert doc["created"] and doc["commit"] == self.commits[commit]
                ids.setdefault(commit, []).append(doc["baseline_id"])
            self.done[key] = ids
        return self.done[key]

    def kbase(self, db: str, scenario: str, *args, strict: bool = False) -> CliResult:  # noqa: F821
        self.ensure(db, scenario)
        return _kbase(*args, "--db", db, "--repo", self.repo, "--name", self.workload(scenario),
                      strict=strict)


def _git_commit(repo, path: Path, text: str, message: str) -> str:
    import git

    path.write_text(text)
    repo.index.add([path.name])
    actor = git.Actor("kbase test", "test@kbase.invalid")
    return repo.index.commit(message, author=actor, committer=actor).hexsha


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    import git

    root = tmp_path_factory.mktemp("gate_repo")
    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "kbase test")
        cw.set_value("user", "email", "test@kbase.invalid")
    train = root / "train.py"
    commits = {}
    for i in range(5):
        commits[f"c{i}"] = _git_commit(repo, train, f"step = {i}\n", f"commit c{i}")
    repo.git.checkout("-b", "feature", commits["c2"])
    commits["f1"] = _git_commit(repo, train, "step = 'feature'\n", "feature work")
    repo.git.checkout("main")
    assert repo.head.commit.hexsha == commits["c4"]
    exports = Exports(shared_export_dir(tmp_path_factory), GATE_RECIPES)
    return World(repo=root, commits=commits, exports=exports)


@pytest.fixture(scope="module")
def sqlite_url(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('gate_store') / 'kbase.db'}"


@pytest.fixture(scope="module")
def pg_module_url(request):
    """One PostgreSQL database for the module on the session's server (``pg_url`` of conftest): the
    scenarios are isolated by workload name, so their baselines are snapshotted once, not per test.
    None when conftest has no such server fixture (then each test gets ``pg_db_url``)."""
    try:
        from helpers import pg

        admin = request.getfixturevalue("pg_url")
    except (ImportError, AttributeError, pytest.FixtureLookupError):
        yield None
        return
    url = pg.create_database(admin)
    yield url
    gc.collect()
    pg.drop_database(admin, url)


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, sqlite_url) -> str:
    """The store URL: a module-wide SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite":
        return sqlite_url
    url = request.getfixturevalue("pg_module_url")
    if url is None:
        try:
            url = request.getfixturevalue("pg_db_url")
        except pytest.FixtureLookupError:
            pytest.skip("no pg_db_url fixture in tests/conftest.py: PostgreSQL variant skipped")
    _PG_USED.append(True)
    return url


def _one_line_error(r) -> None:
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kbase: error:"), r
    assert "Traceback" not in r.stderr


def _json(r) -> dict:
    return json.loads(r.stdout)


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
