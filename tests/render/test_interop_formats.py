"""Bencher Metric Format and github-action-benchmark ``customSmallerIsBetter`` output
(``kbase.render.interop``): the documented shapes, strict JSON, and names that stay distinct."""

from __future__ import annotations

import json
import math

import pytest

from kbase.render.interop import (
    BMF_NAME_LIMIT,
    MEASURE_TIME,
    benchmark_name,
    bmf_from_diff,
    bmf_from_leaderboard,
    dumps_strict,
    gab_from_diff,
    gab_from_leaderboard,
)


@pytest.fixture(scope="module")
def leaderboard(tmp_path_factory):
    from kbase.analysis.leaderboard import build_leaderboard
    from kbase.analysis.window import WindowSpec, select_window
    from kbase.readers import read_profile
    from kbase.synth.generate import ExportSpec, generate_export

    path = tmp_path_factory.mktemp("interop") / "train.sqlite"
    generate_export(path, ExportSpec(n_gpus=2, iterations=6, seed=3))
    return build_leaderboard(select_window(read_profile(path), WindowSpec()))


def _doc(lb) -> dict:
    """A small kbase.diff/4 document of the leaderboard against itself with one kernel changed."""
    t = lb.table
    rows = [{"class": "regressed" if i == 0 else "unchanged", "name": n, "short_name": s, "category": c, "tc_after": tc,
             "after": float(p) * (1.1 if i == 0 else 1), "count_after": float(k), "avg_after": float(a),
             "diagnosis": "slower per launch"} for i, (n, s, c, tc, p, k, a) in
            enumerate(zip(t["name"], t["short_name"], t["category"], t["tc"], t["per_iter_ns"], t["count_per_iter"], t["avg_ns"]))]
    rows.append({"class": "gone", "name": "gone_kernel", "short_name": "gone_kernel", "after": 0.0})
    rows.append({"class": "new", "name": "nan_kernel", "short_name": "nan_kernel", "after": float("nan")})
    return {"schema": "kbase.diff/4", "after": {"workload": "train"}, "kernels": rows,
            "totals": {"kernel": {"before": 1.0, "after": 2.0}, "iteration_wall": {"before": 3.0, "after": float("inf")}}}


def _check_bmf(doc: dict) -> None:
    """The BMF JSON schema (https://bencher.dev/bmf.json): object of objects of {value, lower?, upper?}."""
    assert doc
    for bench, measures in doc.items():
        assert isinstance(bench, str) and 0 < len(bench) <= BMF_NAME_LIMIT
        for measure, metric in measures.items():
            assert 0 < len(measure) <= 64
            assert set(metric) <= {"value", "lower_value", "upper_value"} and "value" in metric
            assert all(isinstance(v, float) and math.isfinite(v) for v in metric.values())
            if "lower_value" in metric:
                assert metric["lower_value"] <= metric["value"] <= metric["upper_value"]


def test_bmf_from_leaderboard(leaderboard):
    doc = bmf_from_leaderboard(leaderboard, "train", limit=10)
    _check_bmf(doc)
    assert len(doc) == 11  # ten kernels and the total
    top = doc[benchmark_name("train", leaderboard.table["name"].iloc[0])][MEASURE_TIME]
    assert top["lower_value"] < top["value"] < top["upper_value"]  # spread of the iterations
    assert json.loads(dumps_strict(doc)) == doc


def test_bmf_from_diff_is_strict(leaderboard):
    doc = bmf_from_diff(_doc(leaderboard), limit=5)
    _check_bmf(doc)
    assert not any("gone_kernel" in k or "nan_kernel" in k for k in doc)  # no after value: left out
    assert benchmark_name("train", "(GPU wall per iteration)") not in doc  # infinite: left out
    dumps_strict(doc)  # raises on NaN/Infinity


def test_github_action_benchmark_shape(leaderboard):
    for entries in (gab_from_leaderboard(leaderboard, "train", limit=8), gab_from_diff(_doc(leaderboard), limit=8)):
        assert entries
        for e in entries:
            assert set(e) <= {"name", "unit", "value", "range", "extra"} and {"name", "unit", "value"} <= set(e)
            assert isinstance(e["value"], float) and math.isfinite(e["value"])
            assert isinstance(e.get("range", ""), str) and isinstance(e.get("extra", ""), str)
        assert len({e["name"] for e in entries}) == len(entries)
        json.loads(dumps_strict(entries))


def test_long_names_stay_distinct():
    a, b = "void k<" + "x" * 2000 + ">(int)", "void k<" + "x" * 2000 + ">(float)"
    na, nb = benchmark_name("w", a), benchmark_name("w", b)
    assert len(na) <= BMF_NAME_LIMIT and len(nb) <= BMF_NAME_LIMIT and na != nb


def test_dumps_strict_refuses_nan():
    with pytest.raises(ValueError):
        dumps_strict({"x": float("nan")})
