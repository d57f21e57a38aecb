"""``write_bulk_history`` (the benchmarks' and import tests' stores) writes baselines the comparison reads
like snapshots: a summary with the window, GPUs and iteration keys, per-iteration samples and launch
sketches. A baseline without them compares per window-second with every kernel at 0 and "assumed"
noise, which measured nothing (the S2 benchmark did that until its stores carried summaries)."""

from __future__ import annotations

import math

import kbase
from kbase.store import open_store
from kbase.synth.history import InjectedStep, _bulk_mix, write_bulk_history


def test_bulk_baselines_compare_per_iteration_with_measured_noise(tmp_path):
    url = f"sqlite:///{tmp_path / 'kb.db'}"
    hot = _bulk_mix(20)[0].name
    st = open_store(url)
    try:
        write_bulk_history(st.engine, 3, n_kernels=20, iterations=12, gpus=4,
                           steps=[InjectedStep(at=2, kernel=hot, factor=1.10, subject="slower")])
    finally:
        st.close()
    settings = kbase.Settings.load(db=url)
    lb = kbase.baseline("@1", settings).leaderboard
    s = lb.summary
    assert s.aligned and s.gpus == 4 and s.iterations == 12 and s.iteration_keys == list(range(2, 14))
    assert s.kernel_ns_per_iter is not None and math.isclose(
        s.kernel_ns_per_iter, float(lb.table["total_ns"].sum()) / (12 * 4), rel_tol=1e-6)
    from kbase.analysis.sketch import COUNT

    with open_store(url, readonly=True) as st:
        sketches = st.reader.kernel_table(1).sketches
    assert sketches is not None and int((sketches[:, :, COUNT] > 0).any(axis=1).sum()) == 20  # a sketch a kernel

    quiet = kbase.compare("@1", "@2", settings).result.rows
    assert set(quiet["noise_source"]) <= {"launches", "iterations"}, set(quiet["noise_source"])
    assert (quiet["before"] > 0).all() and not (quiet["class"] == "regressed").any()

    stepped = kbase.compare("@2", "@3", settings).result.rows
    # judged alone, only the slowed kernel regressed; the ops it shares with kernels split unevenly between them
    # may be judged as units (class swapped), but the change is then gated through its op
    assert list(stepped.loc[stepped["own_class"] == "regressed", "name"]) == [hot]
    assert set(stepped.loc[stepped["class"] == "regressed", "name"]) <= {hot}
    row = stepped[stepped["name"] == hot].iloc[0]
    assert abs(row["delta_pct"] - 10.0) < 1.5, row["delta_pct"]


def test_a_snapshot_after_bulk_baselines_takes_the_next_id(store_url, tmp_path):
    """The bulk writer gives its baselines' ids itself; on PostgreSQL the id sequence is moved past them, so
    the next snapshot is stored (it collided with baseline 1 before)."""
    from helpers.library import snap
    from helpers.tiny_export import make_tiny_export

    with open_store(store_url) as st:
        write_bulk_history(st.engine, 3, n_kernels=6, iterations=4)
    saved = snap(make_tiny_export(tmp_path / "tiny.sqlite"), db=store_url, rev="c" * 40, no_git=True)
    assert saved.created and saved.baseline.id == 4
