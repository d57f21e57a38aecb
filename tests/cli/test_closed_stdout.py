"""A closed stdout never changes the exit code (``kbase gate ... | head`` under ``set -o pipefail``), and no
dependency's warning text reaches stderr. Each command runs as a real process whose stdout is a pipe nobody
reads any more: its first write meets a broken pipe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.gitrepos import commit, git
from helpers.kineto_traces import edit, trace_doc, write_trace

pytestmark = pytest.mark.slow  # fresh interpreters


def _slower(doc: dict) -> None:
    for e in doc["traceEvents"]:
        if e.get("cat") == "kernel" and e["name"] == "relu_kernel":
            e["dur"] = round(e["dur"] * 3, 3)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("pipe")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    db = f"sqlite:///{root / 'a.db'}"
    doc = trace_doc(0, 1, steps=6)
    for i, d in enumerate((doc, doc, edit(doc, _slower))):
        commit(repo, str(i), f"c{i}")
        trace = write_trace(root / f"t{i}.json", d)
        r = run_kbase("snapshot", trace, "--db", db, "--repo", repo, "--name", "train", "-q")
        assert r.rc == 0, r
    return repo, db


def _closed_stdout(args: list[str], cwd: Path) -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-m", "kbase.cli", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env={k: v for k, v in os.environ.items() if k != "KBASE_DEBUG"})
    proc.stdout.close()  # the reader is gone before the command writes a byte
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err.decode()


@pytest.mark.parametrize("args,rc", [
    (["gate", "HEAD~2", "HEAD~1"], 0),
    (["gate", "HEAD~1", "HEAD"], 1),
    (["gate", "HEAD~1", "HEAD", "--format", "json"], 1),
    (["diff", "HEAD~1", "HEAD"], 0),
    (["list"], 0),
    (["list", "--format", "json"], 0),
    (["show", "HEAD", "--format", "json"], 0),
])
def test_a_closed_stdout_keeps_the_exit_code(world, args, rc):
    repo, db = world
    full = [*args, "--db", db, "--repo", str(repo)] + ([] if args[0] in ("list",) else ["--name", "train"])
    open_rc = run_kbase(*full, subprocess=True)
    assert open_rc.rc == rc, open_rc  # the same command with a reader
    got, err = _closed_stdout(full, repo)
    assert got == rc, err
    assert "Error" not in err and "Exception" not in err and "Warning" not in err, err


def test_a_dependency_warning_is_not_printed(monkeypatch, tmp_path):
    """numpy's overflow warning (it names numpy's install path) raised inside a command never reaches stderr."""
    import numpy as np

    import kbase.cli.store as store_cli

    real = store_cli.make_settings

    def noisy(**kw):
        np.float64(1e308) * np.float64(10)  # RuntimeWarning: overflow encountered in scalar multiply
        return real(**kw)

    monkeypatch.setattr(store_cli, "make_settings", noisy)
    r = run_kbase("list", "--db", f"sqlite:///{tmp_path / 'none.db'}")
    assert r.rc == 0 and "Warning" not in r.stderr and "numpy" not in r.stderr, r
