"""The per-kernel columns are declared once (``kbase.analysis.columns``) and every place that lists them reads the
declaration: the leaderboard's rows, JSON and screen table, the store's kernel blobs, the diff's rows, JSON, CSV and
table, and docs/json-schema.md's field lists (regenerated here: ``KBASE_UPDATE_DOCS=1 python -m pytest -q
tests/test_columns.py``). A column planted in the registry alone appears in all of them."""

from __future__ import annotations

import json
import os
import re

import numpy as np
import pytest

from kbase.analysis import columns as registry
from kbase.analysis import summary
from kbase.analysis.columns import Column, Kind, Stat
from kbase.comparison import diff as comparison_diff
from kbase.render import diff as render_diff
from kbase.render import diff_table
from kbase.render import leaderboard as render_lb
from kbase.store.codec import kernel_blobs

from helpers.shared import REPO
from helpers.tiny_export import make_tiny_export

SCHEMA_DOC = REPO / "docs" / "json-schema.md"
FIELDS_BLOCK = re.compile(r"(<!-- fields: (?P<which>leaderboard|diff) -->\n)(?P<body>.*?)(\n<!-- /fields -->)", re.S)
DIFF_SKETCH = re.compile(r'^ "kernels": \[\{.*?\}\],$', re.S | re.M)


def schema_page(text: str) -> str:
    """docs/json-schema.md with its generated parts as the registry declares them now."""
    lists = {"leaderboard": registry.LEADERBOARD, "diff": registry.DIFF}
    text = FIELDS_BLOCK.sub(lambda m: m.group(1) + registry.field_list(lists[m["which"]]) + m.group(4), text)
    return DIFF_SKETCH.sub(lambda m: registry.field_names(registry.DIFF, ' "kernels": [{') + "}],", text)


def test_schema_page_lists_the_declared_fields():
    text = SCHEMA_DOC.read_text(encoding="utf-8")
    assert sorted(m["which"] for m in FIELDS_BLOCK.finditer(text)) == ["diff", "leaderboard"]
    assert len(DIFF_SKETCH.findall(text)) == 1
    fresh = schema_page(text)
    if os.environ.get("KBASE_UPDATE_DOCS"):
        SCHEMA_DOC.write_text(fresh, encoding="utf-8")
        return
    assert fresh == text, ("docs/json-schema.md: field lists out of date; regenerate with "
                           "KBASE_UPDATE_DOCS=1 python -m pytest -q tests/test_columns.py")


def test_the_lists_read_the_declaration():
    assert summary.COLUMNS == registry.row_fields()
    assert summary.COLUMNS[:5] == ["name", "short_name", "family", "category", "tc"]
    assert comparison_diff.ROW_COLUMNS == registry.diff_row_columns()
    assert render_diff.ROW_FIELDS == [c for c in comparison_diff.ROW_COLUMNS
                                      if c not in ("family", "enough", "own_class")] + ["diagnosis", "amdahl"]
    assert [c.key for c in render_lb.COLUMNS][:7] == ["rank", "gpu", "kernel", "tc", "count", "total", "avg"]
    assert [c.key for c in diff_table.COLUMNS][:3] == ["class", "kernel", "tc"]
    assert kernel_blobs.LEVEL_COLUMNS == ("name_id", "count", "total_ns", "avg_ns", "per_iter_ns", "share_window")
    assert set(kernel_blobs.DERIVED) == {"avg_ns", "per_iter_ns", "share_window", "count_per_iter", "share_kernel",
                                         "amdahl_ceiling"}
    assert set(kernel_blobs.BOARD_COLUMNS) | set(kernel_blobs.LEVEL_COLUMNS[1:]) == kernel_blobs.CODED
    names = [s.name for s in registry.LEADERBOARD]
    assert len(names) == len(set(names)) and len({s.place for s in registry.LEADERBOARD if s.column}) == len(
        [s for s in registry.LEADERBOARD if s.column])


# A statistic planted in the registry alone: derived from stored columns (half the total), shown in ns.
HALF = Stat("half_total_ns", "half the kernel's total", unit="ns", kind=Kind.DERIVED, blob="board",
            compute=lambda c: np.asarray(c["total_ns"]) / 2, column=Column("half", "Half", 0), place=65, cell="time")
# one whose values come from elsewhere (no ``compute``): kept whole in the board blob
KEPT = Stat("kept_ns", "a stored statistic", unit="ns", blob="board")
# a diff row column that follows from the others, shown as a percentage
MOVED = Stat("moved_share", "Δ over the after side's time", unit="fraction", kind=Kind.ROW,
             compute=lambda r: np.asarray(r["delta_ns"], dtype=float) / np.where(r["after"] == 0, 1, r["after"]),
             column=Column("moved", "moved", 0), place=75, cell="pct")


@pytest.fixture
def planted(monkeypatch):
    monkeypatch.setattr(registry, "LEADERBOARD", (*registry.LEADERBOARD, HALF))
    monkeypatch.setattr(registry, "DIFF", (*registry.DIFF, MOVED))


@pytest.fixture
def profiles(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KBASE_DB", f"sqlite:///{tmp_path / 'kbase.db'}")
    return make_tiny_export(tmp_path / "a.sqlite", steps=6), make_tiny_export(tmp_path / "b.sqlite", steps=7)


def test_a_planted_leaderboard_column_reaches_rows_json_table_store_and_docs(planted, profiles):
    import kbase
    from kbase.store.codec.codec import kernel_table

    lb = kbase.top(profiles[0])
    rows = json.loads(render_lb.leaderboard_json(lb))["kernels"]
    assert rows and all(r["half_total_ns"] == r["total_ns"] / 2 for r in rows)
    assert list(rows[0])[: len(registry.row_fields())] == registry.row_fields()
    md = render_lb.leaderboard_md(lb)
    head = next(line for line in md.splitlines() if line.startswith("| #"))
    assert head.split(" | ")[3:7] == ["Count", "Total", "Half", "Avg"]
    assert "half_total_ns" in render_lb.leaderboard_csv(lb).splitlines()[0]
    assert "`half_total_ns` (half the kernel's total)" in registry.field_list(registry.LEADERBOARD)

    blobs = kernel_blobs.encode(kernel_table(lb, []))
    assert blobs == kernel_blobs.encode(kernel_table(lb, [])) and b"half_total_ns" not in blobs.board  # derives
    back = kernel_blobs.LevelRows(kernel_blobs.Packed(blobs.levels), kernel_blobs.Packed(blobs.board))
    assert back.column("half_total_ns") == [r["total_ns"] / 2 for r in rows]


def test_a_planted_stored_column_is_kept_and_one_computed_nowhere_is_an_error(monkeypatch, profiles):
    import kbase
    from kbase.store.codec.codec import kernel_table

    lb = kbase.top(profiles[0])
    before = kernel_blobs.encode(kernel_table(lb, []))
    monkeypatch.setattr(registry, "LEADERBOARD", (*registry.LEADERBOARD, KEPT))
    t = kernel_table(lb, [])
    assert np.isnan(t.extra["kept_ns"]).all()  # the leaderboard computed before it was declared: NULLs
    t.extra["kept_ns"] = np.arange(len(t), dtype=float) + 0.5
    blobs = kernel_blobs.encode(t)
    assert blobs.levels == before.levels and blobs.board != before.board
    assert kernel_blobs.decode(blobs, list(range(len(t)))).extra["kept_ns"].tolist() == t.extra["kept_ns"].tolist()
    older = kernel_blobs.decode(before, list(range(len(t))))  # a store from before the declaration: NaN
    assert np.isnan(older.extra["kept_ns"]).all()
    with pytest.raises(KeyError, match="computed nowhere: \\['kept_ns'\\]"):
        kbase.top(profiles[0])


def test_a_planted_diff_column_reaches_rows_json_csv_table_and_docs(planted, profiles):
    import kbase

    comparison = kbase.compare(str(profiles[0]), str(profiles[1]))
    doc = render_diff.diff_doc(comparison)
    rows = doc["kernels"]
    assert rows and all("moved_share" in r for r in rows)
    assert list(rows[0])[-3:] == ["moved_share", "diagnosis", "amdahl"]
    assert "moved_share" in render_diff.diff_csv(comparison).splitlines()[0]
    md = render_diff.diff_md(doc, show_all=True)
    head = next(line for line in md.splitlines() if line.startswith("| class | kernel |"))
    assert "| Δ% | moved | launches" in head
    assert "`moved_share` (Δ over the after side's time)" in registry.field_list(registry.DIFF)
    assert "moved_share" in schema_page(SCHEMA_DOC.read_text(encoding="utf-8"))
