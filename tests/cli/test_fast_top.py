"""The ``kbase`` script's early answer (``cli.fast_top``): a plain ``kbase top FILE`` is answered without Typer
— from the store, the top cache, or the file — exactly as the ``top`` command answers it (stdout, stderr and
exit code), and anything else is left to the command line."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import kbase_script


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    return generate_export(tmp_path_factory.mktemp("fast") / "e.sqlite", ExportSpec(n_gpus=2, iterations=4, seed=5)).path


def script(*args: object, cwd: Path, fast: bool = True) -> tuple[int, str, str]:
    return kbase_script(*args, cwd=cwd, env={} if fast else {"KBASE_NO_FAST_TOP": "1"})


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True, timeout=60)


@pytest.mark.parametrize("args", [
    ("-f", "json", "--no-store"), ("--no-cache", "-n", "3"), ("-f", "csv", "--per-gpu", "--no-cache"),
    ("-q", "--no-store"), ("-f", "md", "--full-names", "--no-store"),
])
def test_reading_the_file_answers_as_the_command_does(export, tmp_path, args):
    fast = script("top", export, *args, cwd=tmp_path)
    assert fast[0] == 0 and fast == script("top", export, *args, cwd=tmp_path, fast=False)


@pytest.mark.parametrize("target", ["missing.sqlite", "notes.txt", "folder"])
def test_errors_are_the_command_lines_own(tmp_path, target):
    (tmp_path / "notes.txt").write_text("not a profile")
    (tmp_path / "folder").mkdir()
    fast = script("top", target, "--no-store", cwd=tmp_path)
    assert fast[0] == 2 and fast[2].count("\n") == 1 and "Traceback" not in fast[2], fast
    assert fast == script("top", target, "--no-store", cwd=tmp_path, fast=False)


def test_a_stored_file_answers_from_the_store_as_the_command_does(export, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    db = tmp_path / "kb.db"
    assert script("snapshot", export, "--repo", repo, "--db", db, cwd=tmp_path)[0] == 0
    fast = script("top", export, "--repo", repo, "--db", db, "-f", "json", cwd=tmp_path)
    assert fast[0] == 0 and "from the store" in fast[1]
    assert fast == script("top", export, "--repo", repo, "--db", db, "-f", "json", cwd=tmp_path, fast=False)



@pytest.mark.parametrize(("argv", "want"), [
    (["top", "f.sqlite"], {"profile": "f.sqlite", "format": "table", "limit": None}),
    (["top", "-f", "json", "f.sqlite", "-n", "5", "--wide"], {"format": "json", "limit": 5, "wide": True}),
    (["top", "f.sqlite", "--no-store", "--no-cache"], {"no_store": True, "no_cache": True}),
    (["top", "f.sqlite", "--format=csv", "--limit=0", "-q", "--per-gpu", "--db", "k.db", "--repo=r"],
     {"format": "csv", "limit": 0, "quiet": True, "per_gpu": True, "db": "k.db", "repo": "r"}),
])
def test_fast_path_grammar(argv, want):
    from kbase.cli.fast_top import parse

    got = parse(["kbase", *argv])
    assert got is not None and {k: got[k] for k in want} == want


@pytest.mark.parametrize("argv", [
    ["top"], ["list"], ["top", "f", "--db"], ["top", "f", "--name", "x"], ["top", "f", "--marker", "x"], ["top", "f", "--help"],
    ["top", "f", "-f", "xml"], ["top", "f", "-f"], ["top", "f", "-n", "-1"], ["top", "f", "-n", "1.5"],
    ["top", "f", "g"], ["top", "--", "f"], ["top", "f", "--no-cache", "--no-cache"], ["top", "f", "-fjson"],
    ["top", "f", "-q", "--quiet"], ["top", "f", "--by", "op"], ["top", "f", "--wide=yes"],
])
def test_fast_path_leaves_everything_else_to_the_command_line(argv):
    from kbase.cli.fast_top import parse

    assert parse(["kbase", *argv]) is None
