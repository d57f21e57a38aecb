"""A workload typo is caught, a marker that is not an iteration is said (issue 38, point 4).

A store holds ``resnet50`` (two commits) and ``infer`` (one). ``--name resnet5`` is exit 2 for every command
that reads a workload, with the stored names and the close one, the store untouched; ``gate --if-no-baseline
pass`` still passes a workload's first run (a name close to no stored one) and says so, but not a typo of a
stored one; ``--name`` contradicting an ``@ID`` is exit 2. ``--marker step`` finding ``optimizer.step`` inside
each ``ProfilerStep#N`` says so and names the better marker (generated, and the real ResNet-50 trace).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.gitrepos import commit, git
from helpers.shared import KINETO_DIR, require_shared

pytestmark = pytest.mark.slow

READING = [["diff", "HEAD~1", "HEAD"], ["gate", "HEAD~1", "HEAD"], ["steps"], ["history", "flash_fwd"], ["list"],
           ["show", "HEAD"], ["report", "--out", "{tmp}/site"], ["accept", "*flash*", "--rev", "HEAD", "--reason", "x"]]

@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    """What these outputs say, not how wide they are: notes and tables unwrapped at 200 columns (piped output is
    100 wide without COLUMNS)."""
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from kbase.synth.generate import ExportSpec, generate_export

    root = tmp_path_factory.mktemp("names")
    repo, db = root / "repo", f"sqlite:///{root / 'k.db'}"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    export = root / "e.sqlite"
    generate_export(export, ExportSpec(n_gpus=1, iterations=6, seed=3))
    for i, names in enumerate((["resnet50", "infer"], ["resnet50"])):
        commit(repo, f"{i}\n", f"commit {i}")
        for name in names:
            assert run_kbase("snapshot", export, "--db", db, "--repo", repo, "--name", name, "-q", "--force").rc == 0
    return {"root": root, "repo": repo, "db": db, "file": Path(db.removeprefix("sqlite:///")), "export": export}


def _kb(s: dict, *args: str):
    return run_kbase(*args, "--db", s["db"], "--repo", s["repo"])


@pytest.mark.parametrize("cmd", READING, ids=lambda c: c[0])
def test_a_workload_typo_is_exit_2_with_the_stored_names(store, tmp_path, cmd):
    before = store["file"].read_bytes()
    r = _kb(store, *[a.replace("{tmp}", str(tmp_path)) for a in cmd], "--name", "resnet5")
    assert r.rc == 2, r
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in r.stderr
    assert line.startswith("kbase: error: --name 'resnet5': no workload of that name in the store")
    assert "did you mean 'resnet50'?" in line and "it holds 2: infer, resnet50" in line
    assert store["file"].read_bytes() == before and not (tmp_path / "site").exists()


def test_gate_if_no_baseline_pass_passes_a_first_run_but_not_a_typo(store, tmp_path):
    typo = _kb(store, "gate", "--name", "resnet5", "--if-no-baseline", "pass")
    assert typo.rc == 2 and "did you mean 'resnet50'?" in typo.stderr
    md = tmp_path / "comment.md"
    first = _kb(store, "gate", "--name", "bert-large", "--if-no-baseline", "pass", "--comment-md", md)
    assert first.rc == 0, first
    said = first.stdout + first.stderr
    assert "PASS" in said and "workload 'bert-large' has no baseline in this store yet" in said
    assert "its first run" in md.read_text(encoding="utf-8")
    strict = _kb(store, "gate", "--name", "bert-large")  # without the flag: the name is checked as any other
    assert strict.rc == 2 and "no workload of that name" in strict.stderr


def test_name_contradicting_a_baseline_id_is_exit_2(store):
    listed = _kb(store, "list", "--name", "infer", "--format", "json")
    infer_id = __import__("json").loads(listed.stdout)["baselines"][0]["id"]
    others = [i for i in (1, 2, 3) if i != infer_id]
    for args in (["diff", f"@{others[0]}", f"@{others[1]}", "--name", "infer"],
                 ["gate", f"@{others[0]}", f"@{others[1]}", "--name", "infer"],
                 ["show", f"@{others[0]}", "--name", "infer"]):
        r = _kb(store, *args)
        assert r.rc == 2, (args, r)
        assert "is a baseline of workload 'resnet50', not of the one named ('infer')" in r.stderr
    assert _kb(store, "diff", f"@{others[0]}", f"@{others[1]}").rc == 0  # no --name: the @IDs say which
    assert _kb(store, "show", f"@{infer_id}", "--name", "infer").rc == 0


def test_a_marker_inside_the_iterations_is_said_with_the_better_one(store):
    r = _kb(store, "top", store["export"], "--marker", "optimizer")
    assert r.rc == 0, r
    said = " ".join((r.stdout + r.stderr).split())  # a note wrapped at the width reads as one line
    assert "marker 'optimizer' may not mark iterations" in said
    assert "of its ranges lie inside ProfilerStep#N ranges" in said and "the better choice: --marker" in said
    good = _kb(store, "top", store["export"], "--marker", "^ProfilerStep#")
    assert good.rc == 0 and "may not mark iterations" not in good.stdout + good.stderr


def test_real_trace_marker_step_finds_optimizer_step_and_says_so(store):
    require_shared()
    trace = KINETO_DIR / "v100_resnet50_workers0.pt.trace.json.gz"
    if not trace.is_file():
        pytest.skip(f"{trace} not present")
    r = _kb(store, "top", trace, "--marker", "step", "--limit", "3")
    assert r.rc == 0, r
    said = " ".join((r.stdout + r.stderr).split())  # a note wrapped at the width reads as one line
    assert "marker 'step' may not mark iterations: its ranges launched 1.3% of the capture's kernel time" in said
    assert "100% of its ranges lie inside ProfilerStep#N ranges" in said
    assert "the better choice: --marker '^ProfilerStep#\\d+$'" in said
