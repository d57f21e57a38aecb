"""One Settings object per command, and the bugs it fixed (issue 10), through the command line as a
user runs it: defaults < [tool.kbase] < environment < flags, the same window on both sides of a
comparison, the same workload name in every command, and errors that name what the user typed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from kbase.settings import Origin, Settings
from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase
from helpers.tiny_export import GLOBAL_TID, STEP_NS, T0, make_tiny_export


def git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("flow")
    spec = ExportSpec(n_gpus=2, iterations=8)
    return {"a": generate_export(d / "a.sqlite", spec, seed=1).path,
            "b": generate_export(d / "b.sqlite", spec, seed=2).path}


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """A git repository whose pyproject.toml sets a workload name and a warm-up; cwd is inside it."""
    repo = tmp_path / "proj"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "T")
    git(repo, "config", "user.email", "t@example.com")
    (repo / "pyproject.toml").write_text('[tool.kbase]\nname = "train"\nwarmup = 2\ndb = "store/kbase.db"\n')
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one")
    monkeypatch.chdir(repo)
    monkeypatch.delenv("KBASE_DB", raising=False)
    return repo


def test_settings_layers_and_origins(project, monkeypatch):
    s = Settings.load()
    assert s.workload == "train" and s.window.warmup == 2
    assert s.origin("name") == Origin.CONFIG and s.origin("warmup") == Origin.CONFIG
    assert s.store_url() == f"sqlite:///{project / 'store' / 'kbase.db'}"  # relative to the project
    monkeypatch.setenv("KBASE_DB", str(project / "env.db"))
    s = Settings.load(window={"warmup": 0})
    assert s.origin("db") == Origin.ENV and s.store_url().endswith("env.db")
    assert s.window.warmup == 0 and s.origin("warmup") == Origin.FLAG
    s = Settings.load(db="sqlite:///flag.db", policy={"max_increase_pct": 9})
    assert s.origin("db") == Origin.FLAG and s.policy.max_increase_pct == 9


def test_pyproject_window_reaches_the_file_side_of_a_gate(project, exports):
    """Bug: with [tool.kbase] warmup = 2, `snapshot a` then `gate HEAD b.sqlite` was INCOMPARABLE
    ("warmup=2 vs warmup=default"): the file side never saw the project settings."""
    assert run_kbase("snapshot", exports["a"]).rc == 0
    r = run_kbase("gate", "HEAD", exports["b"], "--format", "json")
    doc = json.loads(r.stdout)
    assert doc["comparable"], doc["mismatches"]
    assert r.rc == 0, r
    assert doc["before"]["window_spec"] == doc["after"]["window_spec"]
    assert "warmup=2" in doc["after"]["window_spec"]


def test_show_honours_the_workload_name(project, exports):
    """Bug: `kbase show HEAD` ignored [tool.kbase] name ("no baseline of workload 'default'")."""
    assert run_kbase("snapshot", exports["a"]).rc == 0
    r = run_kbase("show", "HEAD", "--format", "json", "--limit", "1")
    assert r.rc == 0, r
    assert json.loads(r.stdout)["baseline"]["workload"] == "train"


@pytest.mark.parametrize("flags, key", [(("--gpu", "1"), "gpu=1"), (("--iteration-kernel", "ncclDevKernel"),
                                                                     "iteration_kernel=ncclDevKernel"),
                                        (("--trim", "0", "100"), "trim=0.0:100.0")])
def test_gate_applies_every_window_option(exports, flags, key, tmp_path, monkeypatch):
    """Bug: `kbase gate` silently dropped --iteration-kernel, --trim and --gpu for profile arguments."""
    monkeypatch.chdir(tmp_path)
    r = run_kbase("gate", exports["a"], exports["b"], "--format", "json", *flags)
    doc = json.loads(r.stdout)
    assert key in doc["before"]["window_spec"] and key in doc["after"]["window_spec"], r
    if key == "gpu=1":
        assert doc["before"]["gpus"] == 1
    if key.startswith("trim"):
        assert not doc["before"]["aligned"]


def test_marker_without_launches_names_the_marker_not_gpu(tmp_path):
    """Bug: a marker that matched ranges holding no launch said `--gpu None: ...`."""
    import sqlite3

    path = make_tiny_export(tmp_path / "t.sqlite")
    with sqlite3.connect(path) as conn:  # four "idle" ranges on the launching thread, between launches
        for s in range(1, 5):
            base = T0 + s * STEP_NS
            conn.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, ?, ?)",
                         (base + 5_000_000, base + 6_000_000, "idle", GLOBAL_TID))
    r = run_kbase("top", path, "--marker", "^idle$")
    assert r.rc == 2, r
    assert "--gpu" not in r.stderr
    assert r.stderr.startswith("kbase: error: --marker '^idle$': no kernel launch") and "iterations 1..3" in r.stderr


def test_a_bare_number_is_a_revision_everywhere(project, exports):
    """Bug: `12` meant baseline 12 to `show` and a git revision to `diff`. Now @12 is a baseline and 12 a
    revision in every command; show says how to name the baseline."""
    assert run_kbase("snapshot", exports["a"]).rc == 0
    r = run_kbase("show", "1")
    assert r.rc == 2 and "write @1" in r.stderr, r
    assert run_kbase("show", "@1", "--format", "json", "--limit", "1").rc == 0
    r = run_kbase("diff", "1", "HEAD")
    assert r.rc == 2 and "unknown git revision '1'" in r.stderr, r


def test_format_detected_and_settings_read_once_per_snapshot(project, exports, monkeypatch):
    import kbase.readers
    import kbase.settings

    calls = {"detect": 0, "config": 0}
    real_detect, real_config = kbase.readers.detect_format, kbase.settings.load_tool_config

    def detect(path):
        calls["detect"] += 1
        return real_detect(path)

    def config(root):
        calls["config"] += 1
        return real_config(root)

    monkeypatch.setattr(kbase.readers, "detect_format", detect)
    monkeypatch.setattr(kbase.settings, "load_tool_config", config)
    r = run_kbase("snapshot", exports["a"])
    assert r.rc == 0, r
    assert calls == {"detect": 1, "config": 1}


def test_errors_name_the_origin_of_a_bad_value(project, exports):
    r = run_kbase("top", exports["a"], "--gpu", "7")
    assert r.rc == 2 and "--gpu 7: no such GPU" in r.stderr and "available: 0, 1" in r.stderr, r
    (project / "pyproject.toml").write_text('[tool.kbase]\nwarmup = 9\n')
    r = run_kbase("top", exports["a"])
    assert r.rc == 2 and "[tool.kbase] warmup = 9" in r.stderr and "pyproject.toml" in r.stderr, r
