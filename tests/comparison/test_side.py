"""A side built straight from a stored kernel table (``store.codec.capture_from_table``, no pandas) equals the one
built from the same captures' live Leaderboards (``side.side_from_leaderboards``, the path every live capture
takes): kernels and totals exactly, per-iteration samples, levels and launch sketches within their stored
codes' error — for an aligned capture, one without iteration markers, and two repeat captures pooled."""

from __future__ import annotations

import numpy as np
import pytest

import kbase
from kbase.comparison.side import KERNEL_COLUMNS, side_from_captures, side_from_leaderboards
from kbase.store import open_store
from kbase.store.read.reader import load_capture
from kbase.synth.generate import ExportSpec, generate_export


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    root = tmp_path_factory.mktemp("side")
    settings = kbase.Settings.load(db=f"sqlite:///{root / 'kb.db'}", name="side")
    ids, live = {}, {}
    for key, spec in {"aligned": ExportSpec(seed=1, iterations=6),
                      "again": ExportSpec(seed=2, iterations=6),
                      "unmarked": ExportSpec(seed=3, iterations=6, nvtx=False)}.items():
        path = root / f"{key}.sqlite"
        generate_export(path, spec)
        live[key] = kbase.leaderboard(kbase.window(kbase.read(path, settings), settings), sketches=True)
        with open_store(settings) as st:
            ids[key] = kbase.snapshot(path, settings, rev=f"{len(ids) + 1:040x}", no_git=True, store=st).baseline.id
    return settings, ids, live


def _assert_same(a, b) -> None:
    assert a.kernels.index.tolist() == b.kernels.index.tolist()
    for c in KERNEL_COLUMNS:
        x, y = a.kernels[c], b.kernels[c]
        if x.dtype == object:
            assert x.tolist() == y.tolist(), c
        else:
            np.testing.assert_allclose(x.astype(float), y.astype(float), rtol=1e-12, err_msg=c)
    for f in ("samples", "total_samples", "levels"):  # per-iteration ns as 10-bit mantissa codes (store-format.md)
        np.testing.assert_allclose(getattr(a, f), getattr(b, f), rtol=2.0**-10, atol=0.5, err_msg=f)
    # launch sketch quantiles as 8-bit mantissa codes: <= 2^-9 relative (docs/store-format.md)
    np.testing.assert_allclose(a.sketches, b.sketches, rtol=2.0**-9, atol=0.5)
    for f in ("unit", "n_units", "n_gpus", "unit_wall_ns", "totals", "aligned", "step_wall_ns", "resolution_ns"):
        assert getattr(a, f) == getattr(b, f), f


@pytest.mark.parametrize("keys", [("aligned",), ("unmarked",), ("aligned", "again")])
def test_stored_rows_give_the_side_the_leaderboards_give(stored, keys):
    settings, ids, live = stored
    with open_store(settings, readonly=True) as st:
        bs = [st.reader.baseline(ids[k]) for k in keys]
        from_rows = side_from_captures([load_capture(st.reader, b) for b in bs], "x")
    from_frames = side_from_leaderboards([live[k] for k in keys], "x")
    assert from_rows.aligned == (keys != ("unmarked",))
    per_capture = 5 if from_rows.aligned else 8  # 6 iterations, the warm-up skipped; else the sketch's chunks
    assert len(from_rows.kernels) > 10 and from_rows.samples.shape[1] == per_capture * len(keys)
    _assert_same(from_rows, from_frames)
