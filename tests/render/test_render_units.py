"""Stage 7 — render: units, p-values, the sentences, strict JSON, and the leaderboard formats."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

import kbase
from kbase import jsonable
from kbase.render import leaderboard as render_lb
from kbase.render.diff import amdahl_text, diagnosis
from kbase.synth.generate import ExportSpec, generate_export
from kbase.units import ABSENT, fmt_delta_pct, fmt_ns, fmt_p, fmt_pct


@pytest.mark.parametrize("ns, text", [(None, ABSENT), (float("nan"), ABSENT), (float("inf"), ABSENT), (999, "999 ns"), (1500, "1.50 µs"),
                                      (2_500_000, "2.500 ms"), (3e9, "3.000 s"), (-1500, "-1.50 µs")])
def test_fmt_ns(ns, text):
    assert fmt_ns(ns) == text


@pytest.mark.parametrize("p, text", [(0.5, "0.5"), (0.0312, "0.031"), (0.0004, "4.0e-04"), (2e-246, "< 1e-6"),
                                     (None, ABSENT)])
def test_fmt_p_is_readable(p, text):
    assert fmt_p(p) == text


def test_percentages():
    assert fmt_pct(0.123) == "12.3%" and fmt_pct(None) == ABSENT and fmt_pct(float("inf")) == ABSENT
    assert fmt_delta_pct(12.34) == "+12.3%" and fmt_delta_pct(float("inf")) == "new" and fmt_delta_pct("inf") == "new"


def test_jsonable_is_strict():
    doc = {"a": float("nan"), "b": [float("inf"), -float("inf"), 1.5], "c": {"d": math.nan}}
    text = jsonable.dumps(doc)
    assert json.loads(text) == {"a": None, "b": [None, None, 1.5], "c": {"d": None}}
    assert "NaN" not in text and "Infinity" not in text


def test_jsonable_survives_lone_surrogates():
    text = jsonable.dumps({"name": "k\udcff"})
    assert json.loads(text)["name"] == "k\udcff"


def _row(**kw):
    base = {"class": "regressed", "count_before": 12.0, "count_after": 12.0, "avg_before": 100.0, "avg_after": 110.0,
            "share_before": 0.1, "before": 1200.0, "after": 1320.0, "effect": 0.01, "swap": False}
    return {**base, **kw}


def test_diagnosis_tells_more_launches_from_slower_launches():
    assert diagnosis(_row()) == "slower per launch (+10.0%)"
    assert diagnosis(_row(count_after=18.0, avg_after=100.0)) == "more launches (+6.0/iter)"
    assert diagnosis(_row(**{"class": "new"})) == "new"
    assert diagnosis(_row(swap=True)).startswith("algorithm swap: ")


def test_amdahl_text_says_what_the_change_is_worth():
    text = amdahl_text(_row())
    assert "1.10x slower kernel at 10.0% share" in text and "fixing it is worth" in text
    assert amdahl_text(_row(**{"class": "new", "effect": 0.02})) == "adds 2.00% of the iteration"


@pytest.fixture(scope="module")
def lb(tmp_path_factory):
    truth = generate_export(tmp_path_factory.mktemp("r") / "e.sqlite", ExportSpec(n_gpus=1, iterations=4, seed=9))
    return kbase.top(truth.path)


def test_leaderboard_json_csv_md_agree(lb):
    doc = json.loads(render_lb.leaderboard_json(lb, None))
    assert doc["schema"] == "kbase.leaderboard/1" and len(doc["kernels"]) == len(lb.table)
    rows = list(csv.DictReader(io.StringIO(render_lb.leaderboard_csv(lb))))
    assert [r["name"] for r in rows] == [k["name"] for k in doc["kernels"]]
    md = render_lb.leaderboard_md(lb, 5)
    assert md.count("\n| ") == 5 + 1 and "more kernel(s) not shown" in md
    cut = json.loads(render_lb.leaderboard_json(lb, 3))
    assert cut["truncated"] and cut["omitted"] == len(lb.table) - 3 and len(cut["kernels"]) == 3
