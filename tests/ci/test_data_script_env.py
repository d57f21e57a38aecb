"""``ci/kbase-data.sh`` checks its environment before it touches anything: a remote that git would read as an
option, a data folder it did not create (or the checkout itself), and a data branch that holds code (the
default branch, the checked-out one, one sharing history with it) are refused with exit 2, every file left as
it was; the defaults still work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.gitrepos import commit, git

SCRIPT = Path(__file__).resolve().parents[2] / "ci" / "kbase-data.sh"


@pytest.fixture
def checkout(tmp_path):
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    commit(work, "1", "one")
    git(work, "remote", "add", "origin", str(origin))
    git(work, "push", "-q", "origin", "main")
    git(work, "push", "-q", "origin", "main:refs/heads/code")  # a branch of the code, on the remote only
    return work


def run(work: Path, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "KBASE_DB": f"sqlite:///{work.parent / 'a.db'}", **env}
    return subprocess.run(["bash", str(SCRIPT), "pull"], cwd=work, env=full, capture_output=True, text=True,
                          timeout=120)


def state(work: Path) -> dict[str, str]:
    return {str(p.relative_to(work)): p.read_text() for p in work.rglob("*") if p.is_file() and ".git" not in p.parts}


@pytest.mark.parametrize("env,words", [
    ({"KBASE_DATA_REMOTE": "--upload-pack=touch {pwned}"}, "KBASE_DATA_REMOTE"),
    ({"KBASE_DATA_REMOTE": "-o"}, "KBASE_DATA_REMOTE"),
    ({"KBASE_DATA_DIR": "."}, "KBASE_DATA_DIR"),
    ({"KBASE_DATA_DIR": "../elsewhere"}, "KBASE_DATA_DIR"),
    ({"KBASE_DATA_DIR": "src"}, "not this script's worktree"),
    ({"KBASE_DATA_BRANCH": "main"}, "branch of the code"),
    ({"KBASE_DATA_BRANCH": "-x"}, "not a branch name"),
    ({"KBASE_DATA_BRANCH": "code"}, "shares history with the code"),
])
def test_a_hostile_environment_is_refused_and_nothing_is_touched(checkout, env, words):
    pwned = checkout.parent / "pwned"  # what a remote taken for an option would create
    env = {k: v.replace("{pwned}", str(pwned)) for k, v in env.items()}
    (checkout / "src").mkdir()
    (checkout / "src" / "model.py").write_text("weights = 1\n")
    before, head = state(checkout), git(checkout, "rev-parse", "HEAD")
    r = run(checkout, **env)
    assert r.returncode == 2 and words in r.stderr, (r.returncode, r.stderr)
    assert state(checkout) == before and git(checkout, "rev-parse", "HEAD") == head
    assert git(checkout, "ls-remote", "origin", "refs/heads/main").split()[0] == head
    assert not pwned.exists()


def test_the_defaults_work_and_an_empty_folder_is_taken(checkout):
    (checkout / ".kbase-data").mkdir()
    r = run(checkout)
    assert r.returncode == 0, r.stderr
    assert (checkout / ".kbase-data" / "baselines").is_dir()
    r = run(checkout)  # again: the folder is now this script's worktree
    assert r.returncode == 0, r.stderr
