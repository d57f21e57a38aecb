"""``kbase history --format json`` renders plain rows with json's C encoder: the same document as
``jsonable.dumps`` of the records (strict JSON, NaN as null, names as data)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from kbase import jsonable
from kbase.cli.store import _rows_json

COLS = ["id", "commit", "created_at", "workload", "count", "avg_ns", "share_window"]


def test_rows_json_equals_the_strict_encoder():
    rows = [(1, "a" * 40, datetime(2026, 1, 5, 9, tzinfo=UTC), "w \"q\" <b>", 3, 12.5, None),
            (2, "b" * 40, datetime(2026, 1, 6, 9, tzinfo=UTC), "ünï", 4, 1e300, 0.25)]
    text = _rows_json(COLS, rows)
    assert json.loads(text) == json.loads(jsonable.dumps([dict(zip(COLS, r)) for r in rows]))
    assert text.count("\n") == len(rows) + 1  # one record per line


def test_rows_json_falls_back_for_nan_and_surrogates():
    nan = _rows_json(COLS, [(1, "c", None, "w", 1, float("nan"), float("inf"))])
    assert json.loads(nan)[0]["avg_ns"] is None and json.loads(nan)[0]["share_window"] is None
    odd = _rows_json(COLS, [(1, "c", None, "w\udcff", 1, 1.0, 0.5)])
    assert "\\udcff" in odd  # ASCII escapes, as jsonable writes a lone surrogate
    assert json.loads(_rows_json(COLS, [])) == []
