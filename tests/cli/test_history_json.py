"""``kbase history --format json`` renders plain rows with json's C encoder: the same document as
``jsonable.dumps`` of it (strict JSON, NaN as null, names as data), with the cleaner as the fallback."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from kbase import jsonable
from kbase.api import KernelHistory
from kbase.render.history import history_doc, history_json

COLS = ["id", "commit", "created_at", "workload", "branch", "count", "avg_ns", "per_iter_ns", "share_window"]


def _h(rows):
    return KernelHistory(query="k", name="void k<int>()", short_name="k", rows=[dict(zip(COLS, r)) for r in rows])


def test_history_json_equals_the_strict_encoder():
    rows = [(1, "a" * 40, datetime(2026, 1, 5, 9, tzinfo=UTC), "w \"q\" <b>", "main", 3, 12.5, 10.0, None),
            (2, "b" * 40, datetime(2026, 1, 6, 9, tzinfo=UTC), "w \"q\" <b>", "main", 4, 1e300, 11.0, 0.25),
            (3, "c" * 40, datetime(2026, 1, 7, 9, tzinfo=UTC), "ünï", "main", 4, 1.0, 12.0, 0.25)]
    h = _h(rows)
    text = history_json(h)
    doc = json.loads(text)
    assert doc == json.loads(jsonable.dumps(history_doc(_h(rows))))
    assert doc["schema"] == "kbase.history/1"
    changes = [b["change_pct"] for b in doc["baselines"]]
    assert changes[0] is None and abs(changes[1] - 10.0) < 1e-9 and changes[2] is None  # per workload


def test_history_json_falls_back_for_nan_and_surrogates():
    nan = json.loads(history_json(_h([(1, "c", None, "w", "main", 1, float("nan"), float("inf"), 0.5)])))
    assert nan["baselines"][0]["avg_ns"] is None and nan["baselines"][0]["per_iter_ns"] is None
    odd = history_json(_h([(1, "c", None, "w\udcff", "main", 1, 1.0, 1.0, 0.5)]))
    json.loads(odd)
    assert "\\udcff" in odd  # an escape, as jsonable writes a lone surrogate
    assert json.loads(history_json(_h([])))["baselines"] == []
