"""How results show themselves in a notebook: one registry (``render.notebook.SHOWN``) names every class a
formatter shows, each such class inherits ``display.Shown``, and a result the API returns renders its one-line
``repr`` and its HTML table as a notebook asks for them (``repr`` for text/plain, ``_repr_html_`` for text/html:
what IPython's display formatter calls). The slow end-to-end check of every result type is tests/test_notebook.py.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from html.parser import HTMLParser

from kbase.display import Shown, registered_names
from kbase.render.notebook import SHOWN

from helpers.shared import REPO


def _class(dotted: str) -> type:
    module, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


def test_every_registered_name_is_a_shown_class():
    assert len(SHOWN) >= 10 and set(SHOWN) <= set(registered_names())
    for dotted in SHOWN:
        assert issubclass(_class(dotted), Shown), dotted  # a renamed or moved class would silently lose its repr


def test_every_shown_class_is_registered():
    """A class that inherits ``Shown`` without a row in ``SHOWN`` would show Python's default repr."""
    shown = set()
    for path in (REPO / "kbase").rglob("*.py"):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) == "Shown" for b in node.bases):
                shown.add(f"{module}.{node.name}")
    assert shown == set(SHOWN)


def test_an_unregistered_result_falls_back_to_pythons_repr():
    class Plain(Shown):
        pass

    p = Plain()
    assert repr(p) == object.__repr__(p) and p._repr_html_() is None


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def test_a_leaderboard_renders_in_a_notebook(tmp_path):
    import kbase
    from kbase.analysis.board import board_of
    from kbase.synth.generate import ExportSpec, generate_export

    export = tmp_path / "g.sqlite"
    generate_export(export, ExportSpec(n_gpus=1, iterations=4, seed=3))
    lb = kbase.top(export, kbase.Settings.load(repo=tmp_path))
    text, page = repr(lb), lb._repr_html_()
    rows = lb.records()
    assert text.startswith(f"<Leaderboard: {len(rows):,} kernels; ") and text.endswith(">"), text
    parsed = _Tags()
    parsed.feed(page)
    assert parsed.tags.count("tr") == 1 + min(10, len(rows))  # the header and the top ten kernels
    assert rows[0]["short_name"] in page
    as_rows = board_of(lb)
    assert repr(as_rows).startswith("<LeaderboardRows: ") and as_rows._repr_html_() == page


def test_import_kbase_api_registers_without_loading_the_formatters():
    code = ("import sys, kbase.api, kbase.display as d; "
            "print(len(d.registered_names()), int('kbase.render.notebook.comparison' in sys.modules), "
            "int('numpy' in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.split() == [str(len(SHOWN)), "0", "0"], out
