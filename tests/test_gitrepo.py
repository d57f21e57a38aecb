"""``kbase.gitrepo.open_repo``: the cheap look for a repository before GitPython is imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kbase.errors import InputError
from kbase.gitrepo import _may_hold_repo, open_repo


def _git(*args: str, cwd) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def test_a_plain_folder_is_refused_without_importing_gitpython(tmp_path):
    code = ("import sys; from pathlib import Path; from kbase.gitrepo import open_repo\n"
            "try:\n    open_repo(Path(sys.argv[1]))\nexcept Exception as e:\n    print(type(e).__name__, 'git' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin"}).stdout.split()
    assert out == ["InputError", "False"]
    with pytest.raises(InputError, match="not a git repository"):
        open_repo(tmp_path)


def test_repositories_are_found_as_gitpython_finds_them(tmp_path):
    work = tmp_path / "work"
    (work / "a" / "b").mkdir(parents=True)
    _git("init", "-q", cwd=work)
    assert _may_hold_repo(work) and _may_hold_repo(work / "a" / "b")  # the work tree and below it
    assert open_repo(work / "a" / "b").working_tree_dir == str(work)
    bare = tmp_path / "bare.git"
    _git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    assert _may_hold_repo(bare)  # a bare repository is its own git directory
    linked = tmp_path / "linked"
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x", cwd=work)
    _git("worktree", "add", "-q", str(linked), cwd=work)
    assert (linked / ".git").is_file() and _may_hold_repo(linked)  # a linked work tree: .git is a file
    (tmp_path / "plain").mkdir()
    assert not _may_hold_repo(tmp_path / "plain")  # beside them, not under one


def test_git_dir_in_the_environment_is_left_to_gitpython(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "elsewhere"))
    assert _may_hold_repo(tmp_path)
