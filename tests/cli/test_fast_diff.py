"""The ``kbase`` script's early answer to a plain diff or gate (``cli.fast_diff``): answered without Typer exactly as
the commands answer it (stdout, stderr, exit code, files), with the values the commands would get, and anything
else left to the command line."""

from __future__ import annotations

import inspect
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import kbase_script


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[Path, Path, Path]:
    """Two generated exports (the second with a slower GEMM) and a store holding both (@1, @2)."""
    from kbase.synth.names import default_kernel_mix

    root = tmp_path_factory.mktemp("fastdiff")
    gemm = next(k.name for k in default_kernel_mix() if k.short_name.startswith("nvjet_hsh_256x128"))
    a = generate_export(root / "a.sqlite", ExportSpec(n_gpus=2, iterations=6, seed=1)).path
    b = generate_export(root / "b.sqlite", ExportSpec(n_gpus=2, iterations=6, seed=2, slowdown={gemm: 1.3})).path
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    for n, export in enumerate((a, b)):
        git(repo, "commit", "-q", "--allow-empty", "-m", f"c{n}")
        assert script("snapshot", export, "--repo", repo, "--db", root / "kb.db", cwd=root)[0] == 0
    return a, b, root


def script(*args: object, cwd: Path, fast: bool = True, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    return kbase_script(*args, cwd=cwd, env={**(env or {}), **({} if fast else {"KBASE_NO_FAST_DIFF": "1"})})


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                   capture_output=True, timeout=60)


@pytest.mark.parametrize("args", [
    ("diff", "@1", "@2", "--format", "json"), ("diff", "@1", "@2"), ("diff", "@1", "@2", "-f", "md"),
    ("diff", "@2", "@1", "--format=csv"), ("gate", "@1", "@2"), ("gate", "@2", "@1", "-f", "json"),
    ("diff", "@1", "@9"), ("gate", "@1", "@2", "--format", "xml"),
])
def test_a_stored_diff_or_gate_answers_as_the_command_does(stored, args):
    _, _, root = stored
    db = f"sqlite:///{root / 'kb.db'}"
    fast = script(*args, "--db", db, cwd=root)
    assert fast == script(*args, "--db", db, cwd=root, fast=False)
    assert "Traceback" not in fast[2]
    if args[-1] in ("@9", "xml"):
        assert fast[0] == 2 and fast[2].count("\n") == 1, fast


def test_profiles_and_a_missing_store_answer_as_the_command_does(stored, tmp_path):
    a, b, _ = stored
    for args in (("diff", a, b, "-f", "json"), ("gate", b, a), ("diff", "@1", "@2", "--db", tmp_path / "none.db")):
        fast = script(*args, cwd=tmp_path)
        assert fast == script(*args, cwd=tmp_path, fast=False), args


def test_gate_files_and_the_step_summary_come_out_alike(stored, tmp_path):
    _, _, root = stored
    db = f"sqlite:///{root / 'kb.db'}"
    runs = []
    for fast in (True, False):
        summary = tmp_path / f"summary-{fast}.md"
        summary.write_text("")
        got = script("gate", "@1", "@2", "--db", db, cwd=root, fast=fast, env={"GITHUB_STEP_SUMMARY": str(summary)})
        runs.append((got, summary.read_text()))
    assert runs[0] == runs[1] and runs[0][1]


def _bound(fn: Any, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


@pytest.mark.parametrize("argv", [
    ["diff", "@1"], ["diff", "@1", "@2", "--db", "k.db", "-f", "json"], ["diff", "HEAD~1", "--format=md", "--db=x"],
    ["gate"], ["gate", "@1"], ["gate", "a.sqlite", "b.sqlite", "--format", "json", "--db", "sqlite:///k.db"],
])
def test_the_fast_path_hands_over_what_typer_hands_over(argv, monkeypatch):
    """The values each parameter gets (every other flag at its default) are the ones the Typer command passes."""
    import kbase.cli.diff as commands
    import kbase.cli.diff_run as run
    from kbase.cli.entry import narrowed
    from kbase.cli.fast_diff import answer

    run_diff, run_gate = run.run_diff, run.run_gate
    calls: list[dict[str, Any]] = []
    for module in (run, commands):
        monkeypatch.setattr(module, "run_diff", lambda *a, **k: calls.append(_bound(run_diff, a, k)))
        monkeypatch.setattr(module, "run_gate", lambda *a, **k: calls.append(_bound(run_gate, a, k)) or 0)
    monkeypatch.delenv("KBASE_NO_FAST_DIFF", raising=False)
    monkeypatch.setattr("kbase.cli.closed_stdout.guard_stdout", lambda: None)  # (pytest's capture stays as it is)
    assert answer(["kbase", *argv]) == 0
    narrowed(["kbase", *argv])(args=argv, standalone_mode=False)
    assert len(calls) == 2 and calls[0] == calls[1]


@pytest.mark.parametrize("argv", [
    ["diff"], ["gate", "--warn-only"], ["diff", "@1", "--all"], ["diff", "@1", "--db"], ["diff", "@1", "-f", "json",
    "-f", "md"], ["diff", "@1", "--", "@2"], ["gate", "@1", "@2", "@3"], ["diff", "--help"], ["top", "x.sqlite"],
    ["diff", "@1", ""], ["gate", "-fjson"],
])
def test_anything_else_is_left_to_the_command_line(argv):
    from kbase.cli.fast_diff import parse

    assert parse(["kbase", *argv]) is None


def test_the_window_flags_are_the_commands(monkeypatch):
    from kbase.cli.settings_flags import WINDOW_FLAGS
    from kbase.cli.shared import WINDOW_OPTIONS

    assert tuple(WINDOW_OPTIONS) == WINDOW_FLAGS
