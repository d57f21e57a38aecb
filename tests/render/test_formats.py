"""The renderer registry (``render.formats``): every output format of every command has one renderer, registered
once, and the command line renders through it (no format chains in ``kbase/cli``)."""

from __future__ import annotations

import ast
import io

import pytest

from kbase.enums import BisectFormat, DiffFormat, HistoryFormat, LeaderboardFormat
from kbase.render import formats
from kbase.render.formats import BISECT, DIFF, HISTORY, LEADERBOARD, OP_LEADERBOARD, Registry, Sink

from helpers.shared import REPO


def test_every_format_has_a_renderer():
    for registry in (LEADERBOARD, DIFF, BISECT, HISTORY):
        assert registry.missing() == [], registry.what
    # --by op: the command line refuses the benchmark formats (one line, exit 2) before it renders
    assert OP_LEADERBOARD.missing() == [LeaderboardFormat.BMF, LeaderboardFormat.GITHUB_BENCHMARK]
    assert {DIFF.formats, BISECT.formats, HISTORY.formats} == {DiffFormat, BisectFormat, HistoryFormat}


def test_a_format_registers_once():
    r: Registry[HistoryFormat, object] = Registry("probe", HistoryFormat)
    r.register(HistoryFormat.JSON)(lambda job, out: out.write("one"))
    with pytest.raises(ValueError, match="probe: json has a renderer already"):
        r.register(HistoryFormat.JSON)(lambda job, out: None)
    buf = io.StringIO()
    r.render("json", None, Sink(buf.write, lambda: None))
    assert buf.getvalue() == "one" and r.missing() == [HistoryFormat.TABLE, HistoryFormat.CSV]


def test_the_cli_has_no_format_chain():
    """An ``elif`` on a format in ``kbase/cli`` is a renderer that belongs in ``render.formats``."""
    chains = []
    for path in (REPO / "kbase" / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.If) and len(node.orelse) == 1 and isinstance(node.orelse[0], ast.If):
                test = ast.unparse(node.test) + ast.unparse(node.orelse[0].test)
                if "Format." in test:
                    chains.append(f"{path.name}:{node.lineno}")
    assert not chains, chains


def test_a_leaderboard_renders_through_the_registry(tmp_path):
    import kbase
    from kbase.render.leaderboard import leaderboard_json, leaderboard_md
    from kbase.synth.generate import ExportSpec, generate_export

    export = tmp_path / "g.sqlite"
    generate_export(export, ExportSpec(n_gpus=1, iterations=3, seed=2))
    lb = kbase.top(export, kbase.Settings.load(repo=tmp_path))
    for fmt, expected in ((LeaderboardFormat.JSON, leaderboard_json(lb, 5, None) + "\n"),
                          (LeaderboardFormat.MD, leaderboard_md(lb, 5))):
        buf = io.StringIO()
        LEADERBOARD.render(fmt, formats.LeaderboardJob(lb, 5), Sink(buf.write, lambda: None))
        assert buf.getvalue() == expected
