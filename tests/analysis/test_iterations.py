"""Iteration attribution: a kernel belongs to the step whose CPU range contains its launch call,
never by GPU time — against the generator's known per-step answers."""

from __future__ import annotations

import numpy as np
import pytest

import kbase
from kbase.analysis.iterations import NOT_IN_ITERATION, attribute
from kbase.synth.generate import ExportSpec, generate_export


@pytest.mark.parametrize("spec", [
    ExportSpec(n_gpus=2, iterations=5, seed=3),
    ExportSpec(n_gpus=1, iterations=4, seed=4, marker_event_type=60),  # NVTX start/end ranges
    ExportSpec(n_gpus=2, iterations=4, seed=5, nvtx_text_ids=True),  # names through textId
    ExportSpec(n_gpus=2, iterations=5, seed=6, start_mid_iteration=True, slice_cuts_launches=3),
], ids=["push-pop", "start-end", "text-ids", "sliced"])
def test_per_step_counts_and_totals_equal_the_truth(tmp_path, spec):
    truth = generate_export(tmp_path / "e.sqlite", spec)
    prof = kbase.read(truth.path)
    its = attribute(prof)
    assert its.mode == "marker" and its.marker == "ProfilerStep#N"
    k = prof.kernels
    dur = (k["end"] - k["start"]).to_numpy()
    gpu = k["gpu"].to_numpy()
    names = k["name"].astype(str).to_numpy()
    for rank in range(truth.n_gpus):
        for i in truth.ranges[rank]:  # step i's range; its key is the number in its name
            step = int(truth.markers[i].rsplit("#", 1)[1])
            count, total = truth.iter_count[rank, i].sum(), truth.iter_total[rank, i].sum()
            sel = (its.kernel_iteration == step) & (gpu == rank)
            assert int(sel.sum()) == int(count), (rank, step)
            assert int(dur[sel].sum()) == int(total), (rank, step)
    assert its.no_launch == truth.unattributed
    assert int(((its.kernel_iteration == NOT_IN_ITERATION) & (k["launch_start"].to_numpy() >= 0)).sum()) \
        == truth.outside_ranges
    assert set(np.unique(names)) <= set(truth.names)


def test_iteration_kernel_starts_a_step_at_each_launch(tmp_path):
    truth = generate_export(tmp_path / "n.sqlite", ExportSpec(n_gpus=2, iterations=5, seed=7, nvtx=False))
    prof = kbase.read(truth.path)
    first = truth.names[0]
    its = attribute(prof, iteration_kernel="^" + first.replace("(", r"\(").replace(")", r"\)")
                    .replace("[", r"\[").replace("]", r"\]").replace("*", r"\*").replace("+", r"\+") + "$")
    assert its.mode == "kernel"
    per_gpu = truth.kernels[first].count // truth.n_gpus
    assert its.keys == list(range(per_gpu))


def test_auto_markers_are_anchored_so_one_match_pass_finds_them():
    """``pick_marker`` tries every auto marker in one ``match`` per distinct range name; ``match`` equals
    ``search`` only for patterns anchored at the start."""
    import re

    from kbase.analysis.iterations import AUTO_MARKERS

    assert all(p.startswith("^") and p.endswith("$") for _, p in AUTO_MARKERS)
    names = ["ProfilerStep#3", "xProfilerStep#3", "step 7", "train_step", "iteration 2", "aten::mm, op_id = 5"]
    either = re.compile("|".join(f"(?P<m{i}>{p})" for i, (_, p) in enumerate(AUTO_MARKERS)), re.IGNORECASE)
    for n in names:
        first = next((i for i, (_, p) in enumerate(AUTO_MARKERS) if re.search(p, n, re.IGNORECASE)), None)
        m = either.match(n)
        assert (None if m is None else int(str(m.lastgroup)[1:])) == first, n


def _profile(launches: list[tuple[int, int]], ranges: list[tuple[int, int, int, str]]):
    """A profile of one kernel per (launching thread, launch time) and marker ranges (thread, start, end, name);
    a thread's process is its id >> 24, as in nsys globalTid."""
    from pathlib import Path

    from kbase.readers.profile import GpuColumns, KernelColumns, Profile, RangeColumns

    n = len(launches)
    tid = np.array([t for t, _ in launches], dtype=np.int64)
    at = np.array([s for _, s in launches], dtype=np.int64)
    cols = KernelColumns(start=at + 10, end=at + 20, gpu=np.zeros(n, dtype=np.int32), name=np.zeros(n, dtype=np.int32),
                         names=np.array(["k"], dtype=object), launch_tid=tid, launch_start=at)
    r = RangeColumns(start=np.array([s for _, s, _, _ in ranges], dtype=np.int64),
                     end=np.array([e for _, _, e, _ in ranges], dtype=np.int64),
                     tid=np.array([t for t, _, _, _ in ranges], dtype=np.int64),
                     pid=np.array([t >> 24 for t, _, _, _ in ranges], dtype=np.int64),
                     name=np.array([m for _, _, _, m in ranges], dtype=object))
    gpus = GpuColumns(gpu=np.zeros(1, dtype=np.int32), pid=np.zeros(1, dtype=np.int64),
                      device=np.zeros(1, dtype=np.int32), model=["x"])
    return Profile(source=Path("p"), format="nsys-sqlite", exporter_version="t", columns=cols, range_columns=r,
                   gpu_columns=gpus)


def test_launches_from_a_thread_without_ranges_take_their_process_step():
    """Step markers span the whole process: a launch from a thread that owns no range (autograd's backward
    thread, a comm thread) belongs to the step of its process that contains its launch time; a launch of
    the thread that owns the ranges stays on its own ranges, and other processes' steps never apply."""
    main, backward, other_main, other_worker = (5 << 24) | 1, (5 << 24) | 2, (6 << 24) | 1, (6 << 24) | 3
    steps = [(main, 100, 200, "ProfilerStep#1"), (main, 200, 300, "ProfilerStep#2"),
             (other_main, 1_000, 1_100, "ProfilerStep#1")]
    launches = [(main, 150), (main, 250), (main, 350),  # 1, 2, outside
                (backward, 120), (backward, 299), (backward, 50), (backward, 1_050),  # 1, 2, outside, other process
                (other_worker, 1_010), (other_worker, 150),  # the other process's step 1, outside
                ((7 << 24) | 1, 150), (-1, 150)]  # a process without ranges; no launch call
    its = attribute(_profile(launches, steps))
    n = NOT_IN_ITERATION
    assert its.kernel_iteration.tolist() == [1, 2, n, 1, 2, n, n, 1, n, n, n]
    assert its.keys == [1, 2]
    assert its.outside == 6  # every launch with a launch time in no step (the -1 thread's too)
