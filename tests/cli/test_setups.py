"""Unknown GPU metadata and one comparability rule (issue 38, point 3), from the command line.

- A history whose GPU changes half way (generated: four commits on H100s, then six on A100s where every kernel
  runs 1.5x as long, flash_fwd 30% slower again from the eighth): ``kbase steps`` and ``kbase history`` apply
  one rule — nothing is measured across the change, both say where it is and what changed — and ``steps``
  leaves no baseline out: it finds the A100 step within the A100 baselines.
- A trace without ``deviceProperties`` (its GPU unknown): the INCOMPARABLE verdict names ``--allow-incomparable``
  and how to record the GPU; ``kbase snapshot --gpu-model`` records it, after which the pair compares; a
  ``--gpu-model`` that contradicts what a capture says is one line, exit 2, the store untouched.
- The real ResNet-50 captures of ../shared/data (two name their V100, two do not) agree in steps and history.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.gitrepos import commit, git
from helpers.kineto_traces import trace_doc, write_trace
from helpers.shared import KINETO_DIR, require_shared

pytestmark = pytest.mark.slow

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"

@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    """What these outputs say, not how wide they are: notes and tables unwrapped at 200 columns (piped output is
    100 wide without COLUMNS)."""
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture(scope="module")
def gpu_change(tmp_path_factory):
    from kbase.synth.generate import ExportSpec, generate_export
    from kbase.synth.names import default_kernel_mix

    root = tmp_path_factory.mktemp("setups")
    mix = default_kernel_mix()
    flash = next(k.name for k in mix if k.short_name == "flash_fwd_kernel")
    repo, db = root / "repo", f"sqlite:///{root / 'k.db'}"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commits = []
    for i in range(10):
        a100 = i >= 4
        slow = {k.name: 1.5 for k in mix} if a100 else {}
        if i >= 7:
            slow[flash] = 1.5 * 1.3
        path = root / f"c{i}.sqlite"
        generate_export(path, ExportSpec(n_gpus=2, iterations=6, seed=20 + i, gpu_model=A100 if a100 else H100),
                        slowdown=slow)
        commits.append(commit(repo, f"step = {i}\n", f"train: commit {i}"))
        r = run_kbase("snapshot", path, "--db", db, "--repo", repo, "--name", "train", "-q")
        assert r.rc == 0, r
    return {"repo": repo, "db": db, "commits": commits, "flash": flash}


def _kb(w: dict, *args: str):
    return run_kbase(*args, "--db", w["db"], "--repo", w["repo"], "--name", "train")


def test_steps_finds_steps_within_each_gpu_and_says_where_it_changes(gpu_change):
    w = gpu_change
    c = w["commits"]
    text = _kb(w, "steps")
    assert text.rc == 0, text
    change = f"@5 ({c[4][:12]}): 2x {H100} -> 2x {A100}"
    assert "the GPU model/count changes 1 time(s) along this history" in text.stdout + text.stderr
    assert change in text.stdout + text.stderr and "left out" not in text.stdout + text.stderr
    doc = json.loads(_kb(w, "steps", "--format", "json").stdout)
    assert doc["baselines"] == 10
    assert doc["setup_changes"] == [{"baseline": 5, "commit": c[4], "before": f"2x {H100}", "after": f"2x {A100}",
                                     "gpu": True}]
    flash = [s for s in doc["steps"] if s["name"] == w["flash"]]
    assert flash and all(s["to_commit"] == c[7] for s in flash), doc["steps"]  # the A100 step, at commit 7
    assert not any(s["to_commit"] == c[4] for s in doc["steps"])  # never across the GPU change


def test_history_measures_no_change_across_the_gpu_change_and_marks_it(gpu_change):
    w = gpu_change
    c = w["commits"]
    text = _kb(w, "history", "flash_fwd", "--wide")
    assert text.rc == 0, text
    row = next(line for line in text.stdout.splitlines() if line.strip().startswith("@5 "))
    assert row.rstrip().endswith("new setup"), row
    assert f"setup changed (new setup in Δ vs prev) at @5: 2x {H100} -> 2x {A100}" in text.stdout
    doc = json.loads(_kb(w, "history", "flash_fwd", "--format", "json").stdout)
    rows = {r["id"]: r for r in doc["baselines"]}
    assert rows[5]["change_pct"] is None and rows[5]["setup_change"] == f"2x {H100} -> 2x {A100}"
    assert rows[6]["setup_change"] is None and rows[6]["change_pct"] == pytest.approx(0, abs=3)
    assert rows[4]["gpu_models"] == H100 and rows[5]["gpu_models"] == A100 and rows[5]["gpu_count"] == 2
    assert [s["to_commit"] for s in doc["steps"]] == [c[7]]  # the history's steps: kbase steps' rule


def _trace(path: Path, named: bool, slow: float = 1.0) -> Path:
    doc = trace_doc(world=None, steps=6)
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel":
            e["dur"] = round(e["dur"] * slow, 3)
    if not named:
        del doc["deviceProperties"]
    return write_trace(path, doc)


def test_an_unknown_gpu_is_said_how_to_record_and_gpu_model_records_it(tmp_path, monkeypatch):
    repo, db = tmp_path / "repo", f"sqlite:///{tmp_path / 'k.db'}"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    known, unknown = _trace(tmp_path / "known.json", True), _trace(tmp_path / "unknown.json", False)
    c0 = commit(repo, "a\n", "one")

    def kb(*args):
        return run_kbase(*args, "--db", db, "--repo", repo, "--name", "t")

    assert kb("snapshot", known, "-q").rc == 0
    c1 = commit(repo, "b\n", "two")
    assert kb("snapshot", unknown, "-q").rc == 0
    gate = kb("gate", c0, c1)
    said = gate.stdout + gate.stderr
    assert gate.rc == 2 and "GPU model differs: Fake GPU vs unknown" in said
    assert "--allow-incomparable" in said and "kbase snapshot --gpu-model" in said and "gpu_model" in said
    quiet = kb("gate", c0, c1, "--quiet")
    assert quiet.rc == 2 and "--allow-incomparable" in quiet.stdout + quiet.stderr
    md = tmp_path / "c.md"
    assert kb("gate", c0, c1, "--comment-md", md, "--quiet").rc == 2
    assert "--allow-incomparable" in md.read_text(encoding="utf-8")
    assert kb("gate", c0, c1, "--allow-incomparable", "--quiet").rc != 2

    # a contradiction is refused, the store as it was
    store = Path(db.removeprefix("sqlite:///"))
    before = store.read_bytes()
    bad = kb("snapshot", known, "--gpu-model", "NVIDIA H100 80GB HBM3", "--force")
    assert bad.rc == 2 and len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    assert "--gpu-model 'NVIDIA H100 80GB HBM3'" in bad.stderr and "names its GPU(s) itself (Fake GPU)" in bad.stderr
    assert store.read_bytes() == before
    # recorded: the capture compares with the named one
    c2 = commit(repo, "c\n", "three")
    assert kb("snapshot", unknown, "--gpu-model", "Fake GPU", "-q").rc == 0
    listed = json.loads(kb("list", "--format", "json").stdout)["baselines"]
    assert [b["gpu_models"] for b in listed] == ["Fake GPU", "unknown", "Fake GPU"]
    ok = kb("gate", c0, c2)
    assert ok.rc in (0, 1) and "INCOMPARABLE" not in ok.stdout + ok.stderr, ok
    monkeypatch.setenv("KBASE_GPU_MODEL", "unknown")
    env = kb("snapshot", unknown, "--force", "-q")
    assert env.rc == 2 and "KBASE_GPU_MODEL=unknown" in env.stderr


def test_real_resnet_captures_steps_and_history_agree_on_the_gpu_change(tmp_path):
    require_shared()
    names = ["v100_resnet50_w4_repeat_a", "v100_resnet50_w4_repeat_b", "v100_resnet50_workers0",
             "v100_resnet50_workers4"]
    traces = [KINETO_DIR / f"{n}.pt.trace.json.gz" for n in names]
    if not all(t.is_file() for t in traces):
        pytest.skip("the ResNet-50 traces of ../shared/data/kineto are not there")
    repo, db = tmp_path / "repo", f"sqlite:///{tmp_path / 'k.db'}"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for n, t in zip(names, traces):
        commit(repo, f"{n}\n", n)
        assert run_kbase("snapshot", t, "--db", db, "--repo", repo, "--name", "resnet", "-q").rc == 0
    steps = run_kbase("steps", "--db", db, "--repo", repo, "--name", "resnet", "--format", "json")
    doc = json.loads(steps.stdout)
    assert doc["baselines"] == 4 and len(doc["setup_changes"]) == 1
    change = doc["setup_changes"][0]
    assert change["baseline"] == 3 and change["after"] == "1x unknown GPU" and "V100" in change["before"]
    hist = json.loads(run_kbase("history", "(step)", "--db", db, "--repo", repo, "--name", "resnet",
                                "--format", "json").stdout)
    marked = [r["id"] for r in hist["baselines"] if r["setup_change"]]
    assert marked == [change["baseline"]]
