"""The gate's policy flags say their defaults in their help: those numbers are the Policy's defaults (a
help text once said 5% after the default became 0)."""

import re

import typer.main

from kbase.cli import app
from kbase.policy import Policy


def test_policy_flag_defaults_in_help_match_the_policy():
    click_app = typer.main.get_command(app)
    gate = click_app.commands["gate"]  # type: ignore[attr-defined]
    checked = 0
    for p in gate.params:
        key = p.name
        if key not in Policy.__dataclass_fields__ or not p.help:
            continue
        m = re.search(r"\(default ([0-9.]+)", p.help)
        if m:
            assert float(m.group(1)) == float(getattr(Policy(), key)), (p.opts, p.help)
            checked += 1
    assert checked >= 5
