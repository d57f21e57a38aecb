"""``kbase.cli.narrowed``: a run builds only the command it names, and that command is the full app's."""

from __future__ import annotations

import typer.main

from kbase.cli import app, narrowed


def _signature(cmd) -> list[tuple]:
    return [(p.name, tuple(p.opts), tuple(p.secondary_opts), p.required, repr(p.default)) for p in cmd.params]


def test_each_command_alone_is_the_full_apps_command():
    full = typer.main.get_command(app)
    names = sorted(full.commands)  # type: ignore[attr-defined]
    assert {"top", "diff", "gate", "snapshot", "list", "show", "history", "db"} <= set(names)
    for name in names:
        one = typer.main.get_command(narrowed(["kbase", name, "--help"]))
        assert sorted(one.commands) == [name]  # type: ignore[attr-defined]
        a, b = full.commands[name], one.commands[name]  # type: ignore[attr-defined]
        assert _signature(a) == _signature(b) and a.help == b.help, name
        assert _signature(full) == _signature(one)  # the group's own options stay


def test_anything_else_gets_the_full_app():
    for argv in (["kbase"], ["kbase", "--help"], ["kbase", "tpo"], ["kbase", "-h", "top"]):
        assert narrowed(argv) is app
