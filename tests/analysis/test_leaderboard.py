"""Stage 3 — the leaderboard: exact per-kernel figures against the generator's truth and against a
plain numpy aggregate of the same rows; shares with their stated denominators; Amdahl."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import kbase
from kbase.analysis.leaderboard import amdahl
from kbase.synth.generate import ExportSpec, generate_export


@pytest.fixture(scope="module")
def lb_and_truth(tmp_path_factory):
    truth = generate_export(tmp_path_factory.mktemp("lb") / "e.sqlite", ExportSpec(n_gpus=2, iterations=5, seed=8))
    settings = kbase.Settings.load(window={"warmup": 0})
    return kbase.top(truth.path, settings), truth, kbase.read(truth.path)


def test_whole_run_figures_equal_the_truth(lb_and_truth):
    lb, truth, _ = lb_and_truth
    t = lb.table.set_index("name")
    for name in truth.names:
        got, want = t.loc[name], truth.iter_total[:, :, truth.names.index(name)].sum()
        assert int(got["total_ns"]) == int(want), name
        assert int(got["count"]) == int(truth.iter_count[:, :, truth.names.index(name)].sum())


def test_stats_equal_a_plain_aggregate(lb_and_truth):
    lb, _, prof = lb_and_truth
    k = prof.kernels.assign(dur=lambda d: d["end"] - d["start"], name=lambda d: d["name"].astype(str))
    ref = k.groupby("name")["dur"].agg(["count", "sum", "min", "max", "median", "mean", "std"])
    t = lb.table.set_index("name")
    assert set(t.index) == set(ref.index)
    for col, rcol in (("count", "count"), ("total_ns", "sum"), ("min_ns", "min"), ("max_ns", "max")):
        assert (t[col] == ref.loc[t.index, rcol]).all(), col
    for col, rcol in (("median_ns", "median"), ("avg_ns", "mean"), ("std_ns", "std")):
        assert np.allclose(t[col], ref.loc[t.index, rcol].fillna(0)), col
    assert list(lb.table["total_ns"]) == sorted(lb.table["total_ns"], reverse=True)


def test_shares_have_their_denominators(lb_and_truth):
    lb, _, _ = lb_and_truth
    s = lb.summary
    t = lb.table
    assert s.window_gpu_ns == s.window_ns * s.gpus
    assert np.allclose(t["share_window"], t["total_ns"] / s.window_gpu_ns)
    assert np.allclose(t["share_kernel"], t["total_ns"] / s.total_kernel_ns)
    assert t["share_kernel"].sum() == pytest.approx(1.0)
    assert np.allclose(t["per_iter_ns"], t["total_ns"] / (s.iterations * s.gpus))
    assert s.compute_ns + s.communication_ns + s.memory_ns == s.total_kernel_ns
    comm = t.loc[t["category"] == "communication", "total_ns"].sum()
    assert s.communication_ns == comm and comm > 0  # NCCL is communication, not compute
    assert "GPU-s" in s.share_denominator


def test_samples_sum_to_the_table(lb_and_truth):
    lb, _, _ = lb_and_truth
    per = lb.samples.groupby("name")[["count", "total_ns"]].sum()
    t = lb.table.set_index("name")
    assert (per["count"] == t.loc[per.index, "count"]).all()
    assert (per["total_ns"] == t.loc[per.index, "total_ns"]).all()


def test_without_samples_the_same_board(lb_and_truth):
    """``kbase top`` asks for no per-iteration samples (it shows none): the rows and summary are those of a
    leaderboard with them, the samples empty."""
    lb, truth, _ = lb_and_truth
    bare = kbase.top(truth.path, kbase.Settings.load(window={"warmup": 0}), samples=False)
    assert len(lb.samples) > 0 and len(bare.samples) == 0
    assert list(bare.samples.columns) == list(lb.samples.columns)
    assert bare.table.equals(lb.table)
    assert bare.summary == lb.summary


def test_per_gpu_view_sums_to_the_aggregate(lb_and_truth):
    _, truth, _ = lb_and_truth
    per = kbase.top(truth.path, kbase.Settings.load(window={"warmup": 0}), per_gpu=True).table
    agg = per.groupby("name")[["count", "total_ns"]].sum()
    t = lb_and_truth[0].table.set_index("name")
    assert (agg["total_ns"] == t.loc[agg.index, "total_ns"]).all()
    assert set(per["gpu"]) == {0, 1}


@pytest.mark.parametrize("p, s, want", [(0.5, 2, 1 / 0.75), (0.2, float("inf"), 1.25), (0.0, 3, 1.0)])
def test_amdahl(p, s, want):
    assert amdahl(p, s) == pytest.approx(want)
    assert math.isinf(amdahl(1.0))


def test_tensor_core_states_are_the_three_symbols(lb_and_truth):
    lb, _, _ = lb_and_truth
    assert set(lb.table["tc"]) <= {"tc", "fallback", "na"}
    assert isinstance(lb.table, pd.DataFrame)


@pytest.mark.parametrize("spec", [ExportSpec(n_gpus=2, iterations=5, seed=8), ExportSpec(n_gpus=3, iterations=7, seed=21)])
def test_leaderboard_from_the_sketch_sort_equals_its_own(tmp_path, spec):
    """A snapshot's leaderboard takes its sorted (kernel, duration) keys from the launch sketches' sort
    (CHUNKS sorted runs per kernel, merged): every figure equals the leaderboard's own sort, and the
    sketches equal those built alone."""
    from kbase.analysis.sketch import window_sketches
    from kbase.api import capture

    truth = generate_export(tmp_path / "e.sqlite", spec)
    settings = kbase.Settings.load(window={"warmup": 0})
    win = capture.window(kbase.read(truth.path), settings)
    own = capture.leaderboard(win)
    both = capture.leaderboard(win, sketches=True)
    for col in own.table:
        a, b = np.asarray(own.table[col]), np.asarray(both.table[col])
        assert a.dtype == b.dtype and (np.array_equal(a, b, equal_nan=a.dtype.kind == "f")), col
    alone = window_sketches(win)
    assert both.sketches is not None and alone.keys() == both.sketches.keys()
    assert all(np.array_equal(alone[k], both.sketches[k], equal_nan=True) for k in alone)
    assert len(alone) > 5
