"""Small git chores of the tests that build repositories: run git, commit one file."""

from __future__ import annotations

import subprocess
from pathlib import Path


def git(cwd: Path, *args: str) -> str:
    """``git ARGS`` in ``cwd``; its stdout, stripped (a failure raises)."""
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def commit(repo: Path, text: str, message: str, file: str = "train.py") -> str:
    """Write ``text`` to ``file``, commit it as a throwaway author; the new commit's full hash."""
    (repo / file).write_text(text)
    git(repo, "add", file)
    git(repo, "-c", "user.name=dev", "-c", "user.email=dev@kbase.invalid", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")
