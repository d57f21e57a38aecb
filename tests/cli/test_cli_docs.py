"""The command line as documented: every command has help text and appears in README.md, ``-h`` works,
and errors map to exit codes inside the app, so Typer's stock ``CliRunner`` sees what a shell sees."""

from __future__ import annotations

import re

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from kbase.cli import app

from helpers.shared import REPO
from helpers.tiny_export import make_tiny_export

runner = CliRunner()


def commands() -> list[tuple[str, object]]:
    root = get_command(app)
    out = []
    for name, cmd in root.commands.items():
        sub = getattr(cmd, "commands", None)
        if sub:
            out += [(f"{name} {n}", c) for n, c in sub.items()]
        else:
            out.append((name, cmd))
    return sorted(out)


def test_every_command_has_help_and_is_in_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    names = [n for n, _ in commands()]
    assert {"top", "snapshot", "list", "show", "rm", "history", "diff", "gate", "accept", "demo", "db upgrade",
            "db current"} <= set(names)
    for name, cmd in commands():
        assert (cmd.help or "").strip(), f"kbase {name} has no help text"
        assert re.search(rf"\bkbase {re.escape(name)}\b", readme), f"kbase {name} is not in README.md"
        for param in cmd.params:
            if param.param_type_name == "option" and param.name not in ("help",):
                assert (param.help or "").strip(), f"kbase {name} {param.opts[0]} has no help text"


@pytest.mark.parametrize("args", [["-h"], ["--help"], ["top", "-h"], ["db", "-h"]])
def test_help_flags(args):
    r = runner.invoke(app, args)
    assert r.exit_code == 0 and "Usage" in r.output


def test_stock_cli_runner_sees_exit_codes(tmp_path):
    export = make_tiny_export(tmp_path / "t.sqlite")
    ok = runner.invoke(app, ["top", str(export), "--format", "json"])
    assert ok.exit_code == 0, ok.output
    bad = runner.invoke(app, ["top", str(export), "--gpu", "5"])
    assert bad.exit_code == 2
    assert "kbase: error: --gpu 5: no such GPU" in bad.output and "Traceback" not in bad.output
    missing = runner.invoke(app, ["top", str(tmp_path / "nope.sqlite")])
    assert missing.exit_code == 2 and "no such file" in missing.output
    fmt = runner.invoke(app, ["top", str(export), "--format", "xml"])
    assert fmt.exit_code == 2 and "--format 'xml'" in fmt.output


def test_internal_errors_are_exit_3(tmp_path, monkeypatch):
    import kbase.api

    def boom(*_a, **_k):
        raise RuntimeError("simulated")

    monkeypatch.delenv("KBASE_DEBUG", raising=False)
    monkeypatch.setattr(kbase.api, "top_rows", boom)  # the one call `kbase top` makes
    r = runner.invoke(app, ["top", str(make_tiny_export(tmp_path / "t.sqlite"))])
    assert r.exit_code == 3 and "internal error: RuntimeError: simulated" in r.output
