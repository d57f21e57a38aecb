"""CSV cells a spreadsheet would run as formulas (a kernel name is data, never a formula)."""

from __future__ import annotations

import csv
import io

import pandas as pd

from kbase.api import KernelHistory
from kbase.render.history import history_csv
from kbase.render.leaderboard import to_csv

FORMULAS = ["=cmd|' /C calc'!A0", "+1+1", "-2+3", "@SUM(A1)", "\tx", "\rx"]


def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_leaderboard_csv_neutralises_formulas_and_keeps_numbers():
    rows = _cells(to_csv(pd.DataFrame({"name": FORMULAS + ["plain"], "total_ns": [-1] * 6 + [2]})))
    names = [r[0] for r in rows[1:]]
    assert names == ["'" + f for f in FORMULAS] + ["plain"]
    assert [r[1] for r in rows[1:]] == ["-1"] * 6 + ["2"]  # numbers are not text: untouched


def test_history_csv_neutralises_formulas():
    rows = [{"id": 1, "commit": "a" * 40, "created_at": "2026-01-01", "workload": f, "branch": "main",
             "count": 1, "avg_ns": 1.0, "per_iter_ns": 1.0, "share_window": 0.1} for f in FORMULAS]
    out = _cells(history_csv(KernelHistory(query="k", name="k", short_name="k", rows=rows)))
    assert [r[3] for r in out[1:]] == ["'" + f for f in FORMULAS]
