"""Stage 2 — the window: iterations after warm-up, slices, trims, one GPU; against the generator's
known answers (``GeneratedTruth``), through ``kbase.read`` / ``kbase.window``."""

from __future__ import annotations

import numpy as np
import pytest

import kbase
from kbase.analysis.spec import WindowSpec
from kbase.errors import WindowError
from kbase.synth.generate import ExportSpec, generate_export


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    return generate_export(tmp_path_factory.mktemp("win") / "w.sqlite", ExportSpec(n_gpus=2, iterations=6, seed=11))


def _settings(**window):
    return kbase.Settings.load(window=window)


def test_default_window_skips_one_warmup_iteration(export):
    w = kbase.window(kbase.read(export.path), _settings())
    assert w.aligned and w.mode == "iterations"
    assert w.iteration_keys == [2, 3, 4, 5, 6] and w.available_keys == [1, 2, 3, 4, 5, 6]
    assert w.warmup_skipped == 1 and w.n_gpus == 2
    # the window holds exactly the launches of steps 2..6 on both ranks
    want = int(export.iter_count[:, 1:].sum())
    assert w.n_launches == want
    assert "iterations 2..6 (5 of 6" in w.describe()


@pytest.mark.parametrize("warmup, keys", [(0, [1, 2, 3, 4, 5, 6]), (3, [4, 5, 6])])
def test_warmup_setting(export, warmup, keys):
    w = kbase.window(kbase.read(export.path), _settings(warmup=warmup))
    assert w.iteration_keys == keys
    assert w.n_launches == int(export.iter_count[:, [k - 1 for k in keys]].sum())


@pytest.mark.parametrize("slice_, keys", [("1:3", [2, 3]), (":2", [1, 2]), ("-2:", [5, 6])])
def test_iteration_slice_uses_python_rules(export, slice_, keys):
    w = kbase.window(kbase.read(export.path), _settings(iterations=slice_))
    assert w.iteration_keys == keys and w.warmup_skipped == 0


def test_one_gpu(export):
    w = kbase.window(kbase.read(export.path), _settings(gpu=1))
    assert w.n_gpus == 1
    assert set(np.unique(w.column("gpu"))) == {1}
    assert w.n_launches == int(export.iter_count[1, 1:].sum())


def test_trim_is_not_aligned_and_counts_kernels_starting_inside(export):
    prof = kbase.read(export.path)
    start = prof.kernels["start"].to_numpy()
    lo, hi = int(np.percentile(start, 25)), int(np.percentile(start, 75))
    w = kbase.window(prof, _settings(trim=[lo / 1e9, hi / 1e9]))
    assert not w.aligned and w.mode == "trim" and "NOT iteration-aligned" in w.describe()
    lo_ns, hi_ns = round(lo / 1e9 * 1e9), round(hi / 1e9 * 1e9)
    assert w.n_launches == int(((start >= lo_ns) & (start < hi_ns)).sum())


@pytest.mark.parametrize("window, field", [
    ({"gpu": 7}, "gpu"), ({"warmup": 6}, "warmup"), ({"iterations": "9:"}, "iterations"),
    ({"iterations": "x"}, "iterations"), ({"trim": [5.0, 1.0]}, "trim"), ({"marker": "("}, "marker"),
    ({"marker": "^no such range$"}, "marker"), ({"iteration_kernel": "^zzz$"}, "iteration_kernel"),
])
def test_errors_name_the_field_and_value_not_a_flag(export, window, field):
    prof = kbase.read(export.path)
    with pytest.raises(WindowError) as exc:
        kbase.window(prof, _settings(**window))
    assert exc.value.field == field
    assert "--" not in exc.value.message  # the library does not speak in command-line flags
    if field == "gpu":
        assert exc.value.available == [0, 1]


def test_whole_capture_without_markers(tmp_path):
    truth = generate_export(tmp_path / "n.sqlite", ExportSpec(n_gpus=1, iterations=4, seed=2, nvtx=False))
    w = kbase.window(kbase.read(truth.path), WindowSpec() and _settings())
    assert w.mode == "whole" and not w.aligned and w.n_iterations == 0
    assert w.n_launches == truth.n_kernels
    assert any("NOT iteration-aligned" in n for n in w.notes)


@pytest.mark.parametrize("seed", range(6))
def test_gpu_presence_in_gpu_order_equals_the_count_over_any_order(seed):
    """Launches in GPU order (one reduction per GPU's run) give what the count over a class per launch gives
    for the same launches in any order: GPUs absent, without steps, outside the window, one GPU, none."""
    from kbase.analysis.window import _gpu_presence

    rng = np.random.default_rng(seed)
    n = [0, 1, 50, 2_000, 2_000, 2_000][seed]
    gpus = np.sort(rng.choice(np.array([0, 2, 3, 7][: 1 + seed % 4], dtype=np.int32), n))
    it = np.where(rng.random(n) < 0.6, rng.integers(0, 5, n), -1).astype(np.int64)
    it[gpus == 3] = -1  # a GPU without a step
    mask = (it >= 2) & (gpus != 7)  # a GPU with steps, none kept
    ordered = _gpu_presence(gpus, it, mask)
    shuffled = rng.permutation(n)
    if n > 1:
        shuffled[:2] = [n - 1, 0]  # surely out of GPU order when two GPUs are present
    anyorder = _gpu_presence(gpus[shuffled], it[shuffled], mask[shuffled])
    for a, b in zip(ordered, anyorder):
        assert a.dtype == bool and np.array_equal(a, b)
    if n:
        assert ordered[0].tolist() == (np.bincount(gpus) > 0).tolist()


@pytest.mark.parametrize("pattern", ["runs", "scattered", "none", "all", "first_last"])
def test_window_columns_equal_the_masked_columns(export, pattern):
    """A window's columns (copied run by run where the kept launches come in long runs, else gathered by the
    mask) are the profile's columns under the mask, and new arrays each time (callers write to them)."""
    import dataclasses

    w = kbase.window(kbase.read(export.path), _settings())
    n = len(w.mask)
    rng = np.random.default_rng(1)
    mask = {"runs": (np.arange(n) // 700) % 3 == 1, "scattered": rng.random(n) < 0.5, "none": np.zeros(n, bool),
            "all": np.ones(n, bool), "first_last": np.isin(np.arange(n), [0, n - 1])}[pattern]
    w = dataclasses.replace(w, mask=mask)
    for name in ["name", "gpu", "start", "end", "iteration"]:
        col = w.column(name)
        want = (w.iteration if name == "iteration" else getattr(w.profile.columns, name))[mask]
        assert col.dtype == want.dtype and np.array_equal(col, want)
        col[:1] = -7
        assert np.array_equal(w.column(name), want)
