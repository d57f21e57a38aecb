"""The command line as documented: every command and option has help text, docs/cli.md has a section per
command holding its current ``--help`` (regenerated here: ``KBASE_UPDATE_DOCS=1 python -m pytest -q
tests/cli/test_cli_docs.py`` rewrites them), ``-h`` works, and errors map to exit codes inside the app, so
Typer's stock ``CliRunner`` sees what a shell sees."""

from __future__ import annotations

import os
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


CLI_DOC = REPO / "docs" / "cli.md"
HELP_BLOCK = re.compile(r"(<!-- help: kbase (?P<cmd>[a-z ]+?) -->\n```text\n)(?P<body>.*?)(```)", re.S)
HELP_WIDTH = 100


def help_text(name: str) -> str:
    """``kbase NAME --help`` as a terminal of HELP_WIDTH columns shows it."""
    r = runner.invoke(app, [*name.split(), "--help"], terminal_width=HELP_WIDTH)
    assert r.exit_code == 0, r.output
    return f"$ kbase {name} --help\n" + "\n".join(line.rstrip() for line in r.output.splitlines()) + "\n"


def test_every_command_and_option_has_help():
    names = [n for n, _ in commands()]
    assert {"top", "snapshot", "list", "show", "rm", "history", "diff", "gate", "accept", "demo", "db upgrade",
            "db current", "steps", "report"} <= set(names)
    for name, cmd in commands():
        assert (cmd.help or "").strip(), f"kbase {name} has no help text"
        for param in cmd.params:
            if param.param_type_name == "option" and param.name not in ("help",):
                assert (param.help or "").strip(), f"kbase {name} {param.opts[0]} has no help text"


def test_cli_reference_holds_every_command_with_its_current_help():
    """docs/cli.md: a section per command (``## kbase NAME``) with the command's own ``--help``, so every option
    is documented as the command line parses it."""
    text = CLI_DOC.read_text(encoding="utf-8")
    blocks = {m["cmd"]: m for m in HELP_BLOCK.finditer(text)}
    names = [n for n, _ in commands()]
    assert sorted(blocks) == sorted(names), "docs/cli.md needs one help block per command, and no other"
    for name in names:
        assert re.search(rf"^## kbase {re.escape(name)}$", text, re.M), f"docs/cli.md has no section for kbase {name}"
    fresh = {name: help_text(name) for name in names}
    if os.environ.get("KBASE_UPDATE_DOCS"):
        CLI_DOC.write_text(HELP_BLOCK.sub(lambda m: m.group(1) + fresh[m["cmd"]] + m.group(4), text), encoding="utf-8")
        return
    stale = [name for name in names if blocks[name]["body"] != fresh[name]]
    assert not stale, (f"docs/cli.md: help of {stale} out of date; regenerate with "
                       "KBASE_UPDATE_DOCS=1 python -m pytest -q tests/cli/test_cli_docs.py")
    for name, _ in commands():  # every option appears under its command
        _, cmd = next(c for c in commands() if c[0] == name)
        for param in cmd.params:
            if param.param_type_name == "option":
                assert param.opts[0] in blocks[name]["body"], (name, param.opts[0])


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
    monkeypatch.setattr(kbase.api, "top", boom)  # the one call `kbase top` makes
    r = runner.invoke(app, ["top", str(make_tiny_export(tmp_path / "t.sqlite"))])
    assert r.exit_code == 3 and "internal error: RuntimeError: simulated" in r.output
