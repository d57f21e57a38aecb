"""The ``kbase`` script's early answer (``cli.fast_history``): a plain ``kbase history KERNEL`` as JSON or CSV is
answered without Typer exactly as the ``history`` command answers it (stdout, stderr and exit code: rows,
errors, the budget series, a repository's subjects), and anything else is left to the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.bulk_stores import bulk_store
from helpers.cli import kbase_script
from helpers.shared import REPO


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> tuple[str, str, Path]:
    root = tmp_path_factory.mktemp("fast_history")
    url, name = bulk_store(root, ("bulk", 40, 5, 3), ("other", 6, 3, 3))
    return url, name, root


def script(*args: object, cwd: Path, fast: bool = True) -> tuple[int, str, str]:
    return kbase_script(*args, cwd=cwd, env={} if fast else {"KBASE_NO_FAST_HISTORY": "1"})


CASES = [
    ("{name}", "--name", "bulk", "-f", "json"),
    ("{name}", "--name", "bulk", "--format=csv", "-n", "5"),
    ("--format", "json", "--all-workloads", "{name}", "--limit=3", "--wide", "-q"),
    ("{name}", "--name", "bulk", "--branch", "main", "-f", "json", "-n", "0"),
    ("(step)", "--name", "bulk", "-f", "json"),
    ("{name}", "-f", "json"),  # two workloads, none named: the command's error
    ("no_such_kernel_at_all", "--name", "bulk", "-f", "json"),
    ("{name}", "--name", "nope", "-f", "csv"),
]


@pytest.mark.parametrize("args", CASES)
def test_answers_as_the_command_does(store, args):
    url, name, root = store
    argv = [a.format(name=name) for a in args]
    fast = script("history", *argv, "--db", url, cwd=root)
    assert fast == script("history", *argv, "--db", url, cwd=root, fast=False)
    assert fast[0] in (0, 2) and "Traceback" not in fast[2], fast


def test_a_missing_store_is_the_commands_error(tmp_path):
    fast = script("history", "k", "-f", "json", "--db", tmp_path / "none.db", cwd=tmp_path)
    assert fast[0] == 2 and fast[2].count("\n") == 1, fast
    assert fast == script("history", "k", "-f", "json", "--db", tmp_path / "none.db", cwd=tmp_path, fast=False)


def test_inside_a_repository_the_subjects_are_the_commands(store, tmp_path):
    url, name, _ = store
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True, timeout=60)
    fast = script("history", name, "--name", "bulk", "-f", "json", "--db", url, "--repo", tmp_path, cwd=tmp_path)
    assert fast[0] == 0 and fast == script("history", name, "--name", "bulk", "-f", "json", "--db", url, "--repo",
                                           tmp_path, cwd=tmp_path, fast=False)


@pytest.mark.parametrize(("argv", "want"), [
    (["history", "k", "-f", "json"], {"kernel": "k", "format": "json", "limit": None}),
    (["history", "--format=csv", "k", "-n", "5", "--wide"], {"format": "csv", "limit": 5, "wide": True}),
    (["history", "k", "--format", "json", "--name", "w", "--branch=b", "--db", "x.db", "--repo=r", "-q",
      "--all-workloads"], {"name": "w", "branch": "b", "db": "x.db", "repo": "r", "quiet": True,
                           "all_workloads": True}),
])
def test_fast_path_grammar(argv, want):
    from kbase.cli.fast_history import parse

    got = parse(["kbase", *argv])
    assert got is not None and {k: got[k] for k in want} == want


@pytest.mark.parametrize("argv", [
    ["history", "k"],  # the table: the command line's
    ["history", "k", "-f", "table"],
    ["history", "k", "-f", "md"],
    ["history", "-f", "json"],  # no kernel
    ["history", "k", "j", "-f", "json"],  # two
    ["history", "k", "-f", "json", "-f", "csv"],  # repeated
    ["history", "k", "-f", "json", "--help"],
    ["history", "k", "-fjson"],
    ["history", "k", "-f", "json", "-n", "-1"],
    ["history", "k", "-f", "json", "-n", "x"],
    ["history", "k", "-f", "json", "--name"],  # a value missing
    ["history", "k", "-f", "json", "--name="],  # empty
    ["history", "k", "-f", "json", "--"],
    ["history", "-k", "-f", "json"],
    ["top", "k", "-f", "json"],
])
def test_anything_else_is_the_command_lines(argv):
    from kbase.cli.fast_history import parse

    assert parse(["kbase", *argv]) is None


def test_the_fast_path_loads_no_command_line(store):
    """The point of it: Typer and the command modules stay unloaded (``-X importtime`` lists every import)."""
    url, name, root = store
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KBASE_")}, "PYTHONPATH": str(REPO)}
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "kbase.cli", "history", name, "--name", "bulk",
                        "-f", "json", "--db", url], cwd=root, env=env, capture_output=True, text=True, timeout=120)
    loaded = {line.rsplit("|", 1)[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert p.returncode == 0 and "kbase.cli.fast_history" in loaded
    assert not {m for m in loaded if m == "typer" or m.startswith(("typer.", "kbase.cli.store", "kbase.cli.entry"))}
