"""The GitHub template's data-branch store, end to end: its own steps (``ci/kbase-data.sh`` pull, snapshot,
gate, push; the report) run by ``helpers.workflow_runner`` in two clones of one bare repository (file://), the
generator standing in for the profiler, the real ``kbase`` on PATH.

1. a first run on ``main`` starts the ``kbase-data`` branch (PASS with a notice);
2. two runners at once — a push of the next ``main`` commit (no change: PASS) and a pull request whose GEMM is
   25% slower (FAIL, exit 1) — both fetch the same data branch before either pushes (a barrier in the
   profile step), so one push is refused as a non-fast-forward and retried (fetch, re-import, re-export);
3. afterwards the data branch holds all three baselines, each once, imported into a fresh store; the pull
   request's under its branch; a later ``main`` run gates against them and prunes nothing it needs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from helpers.gitrepos import commit as _commit
from helpers.gitrepos import git as _git
from helpers.workflow_runner import run_job

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
GITHUB = REPO / "ci" / "github" / "kbase.yml"
PROFILE_STEP = "Profile the training job (PLACEHOLDER)"
INSTALL_STEP = "Install kbase"






def _profiler(slow: float, barrier: Path | None = None, me: str = "", other: str = "") -> str:
    """Shell text run instead of nsys: a generated 2-GPU export, one GEMM ``slow`` x slower; with a barrier,
    it then waits until the other runner got here too (both have pulled the data branch by then)."""
    code = ("from kbase.synth.generate import ExportSpec, generate_export; from kbase.synth.demo import SLOWED_FAMILY; "
            "from kbase.synth.names import default_kernel_mix; "
            "k = next(k.name for k in default_kernel_mix() if k.name.startswith(SLOWED_FAMILY)); "
            f"generate_export('out/train.sqlite', ExportSpec(n_gpus=2, iterations=8, seed=int({slow} * 100)), "
            f"overwrite=True, slowdown={{k: {slow}}})")
    text = f'mkdir -p out\npython -c "{code}"\n'
    if barrier is not None:
        text += (f'touch "{barrier}/{me}"\nfor i in $(seq 600); do [ -e "{barrier}/{other}" ] && break; sleep 0.1; done\n'
                 f'[ -e "{barrier}/{other}" ]\n')
    return text


class Runner:
    """One CI runner: its own clone of the shared bare repository, its own temp folder (the job's store)."""

    def __init__(self, root: Path, origin: Path, name: str):
        self.dir = root / name
        _git(root, "clone", "-q", f"file://{origin}", str(self.dir))
        self.temp = root / f"{name}-temp"
        self.temp.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "KBASE_", "RUNNER_"))}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        env.update({"RUNNER_TEMP": str(self.temp), "GITHUB_RUN_ATTEMPT": "1", "KBASE_DATA_RETRIES": "8"})
        self.env = env
        (self.dir / "ci").mkdir(exist_ok=True)
        (self.dir / "ci" / "kbase-data.sh").write_bytes((REPO / "ci" / "kbase-data.sh").read_bytes())
        self.wf = yaml.safe_load(GITHUB.read_text())
        self.runs = 0

    def run(self, event: str, profile: str, base_ref: str = ""):
        self.runs += 1
        head = _git(self.dir, "rev-parse", "--abbrev-ref", "HEAD")
        ctx = {"github": {"event_name": event, "base_ref": base_ref, "repository": "org/train",
                          "ref_name": head if event == "push" else "7/merge",
                          "head_ref": head if event == "pull_request" else "",
                          "event": {"pull_request": {"head": {"repo": {"full_name": "org/train"}}}}},
               "secrets": {"KBASE_DB": ""}}
        env = {**self.env, "GITHUB_RUN_ID": f"{self.dir.name}{self.runs}"}
        return run_job(self.wf["jobs"]["kernel-gate"], self.wf["env"], ctx, self.dir, env,
                       replace={PROFILE_STEP: profile}, skip=(INSTALL_STEP,), timeout=600)


def _data_baselines(root: Path, origin: Path, name: str = "check") -> list[dict]:
    """The data branch's baselines, imported into a fresh store: what every later job starts from."""
    check = root / name
    _git(root, "clone", "-q", "--branch", "kbase-data", f"file://{origin}", str(check))
    db = f"sqlite:///{root / (name + '.db')}"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "kbase.cli", "import", str(check / "baselines"), "--db", db],
                       capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 0, r.stderr
    r = subprocess.run([sys.executable, "-m", "kbase.cli", "list", "--db", db, "--format", "json"], cwd=check,
                       capture_output=True, text=True, env=env, check=False)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["baselines"]


def test_two_runners_at_once_lose_nothing(tmp_path):
    origin = tmp_path / "origin.git"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    seed = tmp_path / "seed"
    _git(tmp_path, "clone", "-q", f"file://{origin}", str(seed))
    _git(seed, "checkout", "-q", "-b", "main")
    c1 = _commit(seed, "model = build()\n", "train: first profiled commit")
    _git(seed, "push", "-q", "origin", "main")

    a, b = Runner(tmp_path, origin, "runner-a"), Runner(tmp_path, origin, "runner-b")
    first = a.run("push", _profiler(1.0))
    assert first.ok, first.log()
    assert "no branch 'kbase-data'" in first.step("Fetch the baselines (kbase-data branch)").output
    assert "pushed to kbase-data" in first.step("Push the baselines (kbase-data branch)").output
    assert first.step("Build the report (main)").status == "success" and (a.dir / "kbase-site" / "index.html").exists()

    # the next main commit (runner a) and a pull request off c1 with a slower GEMM (runner b), at once
    _git(seed, "pull", "-q", "origin", "main")
    c2 = _commit(seed, "model = build(seed=2)\n", "train: tidy the data loader")
    _git(seed, "push", "-q", "origin", "main")
    _git(a.dir, "pull", "-q", "origin", "main")
    _git(b.dir, "fetch", "-q", "origin")
    _git(b.dir, "checkout", "-q", "-b", "gemm-tiles", c1)
    pr = _commit(b.dir, "model = build(gemm_tile='128x256')\n", "train: switch GEMM tile config")
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    with ThreadPoolExecutor(max_workers=2) as pool:
        fa = pool.submit(a.run, "push", _profiler(1.0, barrier, "a", "b"))
        time.sleep(0.2)
        fb = pool.submit(b.run, "pull_request", _profiler(1.25, barrier, "b", "a"), "main")
        on_main, on_pr = fa.result(), fb.result()

    assert on_main.ok and "PASS" in on_main.summary, on_main.log()
    assert on_pr.step("Gate").rc == 1 and "FAIL" in on_pr.summary, on_pr.log()
    pushes = [r.step("Push the baselines (kbase-data branch)") for r in (on_main, on_pr)]
    assert all(p.status == "success" for p in pushes), on_main.log() + on_pr.log()
    assert sum("push refused" in p.output for p in pushes) >= 1, "both fetched before either pushed: one must retry"

    stored = _data_baselines(tmp_path, origin)
    by_commit = {}
    for row in stored:
        by_commit.setdefault(row["commit"], []).append(row)
    assert sorted(by_commit) == sorted([c1, c2, pr]) and all(len(v) == 1 for v in by_commit.values()), stored
    assert by_commit[pr][0]["branch"] == "gemm-tiles" and by_commit[c2][0]["branch"] == "main"

    # a later main run starts from the data branch: it finds c2's baseline to gate against; its prune keeps all
    _git(seed, "pull", "-q", "origin", "main")
    _commit(seed, "model = build(seed=3)\n", "train: bump the optimizer")
    _git(seed, "push", "-q", "origin", "main")
    _git(a.dir, "pull", "-q", "origin", "main")
    third = a.run("push", _profiler(1.0))
    assert third.ok and "PASS" in third.summary and "no baseline" not in third.summary, third.log()
    assert len(_data_baselines(tmp_path, origin, "again")) == 4
