"""The front door from Python: docs/python-api.md's example runs as written, a full gate is reproducible
with documented calls only, and ``import kbase`` stays light."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import kbase
from kbase.synth.generate import ExportSpec, default_kernel_mix, generate_export

from helpers.shared import REPO


def documented_python() -> str:
    """The first Python block of docs/python-api.md (the full gate)."""
    text = (REPO / "docs" / "python-api.md").read_text(encoding="utf-8")
    return re.search(r"```python\n(.*?)```", text, re.S).group(1)


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=60)


@pytest.fixture
def project(tmp_path) -> Path:
    """A repository with two commits; HEAD~1 has a baseline, out/train.sqlite is HEAD's capture with one
    GEMM 25% slower per launch (about 1.1% of the iteration: over the gate's min_effect_pct)."""
    repo = tmp_path / "proj"
    (repo / "out").mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "T")
    git(repo, "config", "user.email", "t@example.com")
    for i in (1, 2):
        (repo / "train.py").write_text(f"v = {i}\n")
        git(repo, "add", "train.py")
        git(repo, "commit", "-q", "-m", f"c{i}")
    slowed = next(k.name for k in default_kernel_mix() if k.name.startswith("sm90_xmma_gemm"))
    spec = ExportSpec(n_gpus=2, iterations=10)
    generate_export(tmp_path / "before.sqlite", spec, seed=1)
    generate_export(repo / "out" / "train.sqlite", spec, seed=2, slowdown={slowed: 1.25})
    settings = kbase.Settings.load(repo=repo, db=f"sqlite:///{repo / '.kbase' / 'kbase.db'}", name="train-8gpu")
    assert kbase.snapshot(tmp_path / "before.sqlite", settings, rev="HEAD~1").created
    return repo


@pytest.mark.slow
def test_documented_python_example_runs_as_written(project):
    code = documented_python()
    assert "kbase.gate(" in code and "kbase.snapshot(" in code and "kbase.read(" in code
    env = {k: v for k, v in os.environ.items() if k != "KBASE_DB"}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([sys.executable, "-c", code], cwd=project, env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert "fail" in out.stdout and "sm90_xmma_gemm" in out.stdout, out.stdout


def test_full_gate_from_python_with_documented_calls(project):
    settings = kbase.Settings.load(repo=project, db=f"sqlite:///{project / '.kbase' / 'kbase.db'}",
                                   name="train-8gpu")
    profile = kbase.read(project / "out" / "train.sqlite")
    win = kbase.window(profile, settings)
    lb = kbase.leaderboard(win)
    assert lb.summary.iterations == 9 and lb.summary.gpus == 2
    res = kbase.snapshot(project / "out" / "train.sqlite", settings)
    assert res.created and res.baseline.commit != kbase.baselines(settings)[-1].commit
    comparison = kbase.compare("HEAD~1", "HEAD", settings)
    assert not comparison.result.mismatches
    gate = kbase.gate("HEAD~1", "HEAD", settings)
    assert gate.verdict.code == 1 and [f.short_name for f in gate.verdict.failing][0].startswith("sm90_xmma_gemm")
    acc = kbase.accept("*sm90_xmma_gemm*", rev="HEAD", reason="new tile config, accepted", settings=settings)
    assert [a.id for a in kbase.acceptances(settings)] == [acc.id]
    assert kbase.gate("HEAD~1", "HEAD", settings).verdict.code == 0
    kbase.revoke(acc.id, settings)
    assert kbase.acceptances(settings) == []
    assert kbase.gate("HEAD~1", "HEAD", settings).verdict.code == 1


def test_public_names():
    assert set(kbase.__all__) >= {"top", "snapshot", "compare", "gate", "accept", "acceptances", "revoke", "history",
                                  "baselines", "Settings"}
    for name in kbase.__all__:
        assert getattr(kbase, name) is not None
    assert (Path(kbase.__file__).parent / "py.typed").is_file()


def test_import_kbase_is_light():
    code = "import sys, kbase; print(sorted(m for m in ('pandas', 'numpy', 'sqlalchemy', 'pyarrow') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "[]", out
