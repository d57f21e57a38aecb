"""Generator -> ``kbase snapshot`` -> store, end to end at small size: what comes back out of the
store must equal the generator's known truth exactly (the benchmark runs the same path at 1M/10M)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kbase.store import open_store as store_open
from kbase.synth.generate import ExportSpec, generate_export, scaled_kernel_mix

from helpers.cli import run_kbase

REV = "0123456789abcdef0123456789abcdef01234567"
N_GPUS, ITERATIONS = 2, 6


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    d = tmp_path_factory.mktemp("gensnap")
    spec = ExportSpec(n_gpus=N_GPUS, iterations=ITERATIONS, kernels=scaled_kernel_mix(50, 80, seed=5),
                      seed=11)
    return d, generate_export(d / "gen.sqlite", spec)


def _snapshot(export: Path, db: str, *extra: str):
    """``kbase snapshot`` into ``db``; the stored (baseline, leaderboard, per-iteration samples {(name, key):
    (launches, ns)}) read back through the API."""
    r = run_kbase("snapshot", export, "--db", db, "--no-git", "--rev", REV, "--force", "--format", "json",
                  *extra)
    assert r.rc == 0, r
    with store_open(db, readonly=True) as st:
        (b,) = st.reader.list_baselines(limit=1)
        t = st.reader.kernel_table(b.id)
        names = st.reader.names(t.name_id.tolist())
        keys = json.loads(b.iteration_keys)
        samples = {(names[n][0], keys[j]): (int(t.iter_count[i, j]), float(t.iter_ns[i, j]))
                   for i, n in enumerate(t.name_id.tolist()) for j in range(len(keys)) if t.iter_count[i, j] > 0}
        return b, st.reader.leaderboard(b), samples


def test_whole_capture_counts_and_totals_equal_the_truth(generated):
    d, truth = generated
    assert len(truth.kernels) > 40 and truth.n_kernels > 500  # a real mix: names, every>1 kernels, repeats
    b, lb, samples = _snapshot(truth.path, f"sqlite:///{d / 'whole.db'}",
                      "--trim", "0", "1e9")  # every kernel starts in it
    assert b.commit == REV and not b.aligned
    got = {n: (c, t) for n, c, t in zip(lb.table["name"], lb.table["count"], lb.table["total_ns"])}
    want = {n: (k.count, k.total_ns) for n, k in truth.kernels.items()}
    assert got == want
    mins = dict(zip(lb.table["name"], lb.table["min_ns"]))
    maxs = dict(zip(lb.table["name"], lb.table["max_ns"]))
    assert mins == {n: k.min_ns for n, k in truth.kernels.items()}
    assert maxs == {n: k.max_ns for n, k in truth.kernels.items()}
    assert b.total_kernel_ns == sum(k.total_ns for k in truth.kernels.values())
    assert int(lb.table["count"].sum()) == truth.n_kernels


def test_default_window_per_kernel_and_per_iteration_equal_the_truth(generated):
    d, truth = generated
    b, lb, samples = _snapshot(truth.path, f"sqlite:///{d / 'window.db'}")
    # default window: the warm-up step skipped, steps keyed by their ProfilerStep number (first_step 1)
    keys = [k + 1 for k in range(1, ITERATIONS)]
    assert b.aligned and lb.summary.iteration_keys == keys and b.gpu_count == N_GPUS

    count = truth.iter_count[:, 1:, :].sum(axis=(0, 1))  # launches of steps 2..6, all ranks
    total = truth.iter_total[:, 1:, :].sum(axis=(0, 1))
    want = {truth.names[i]: (int(count[i]), int(total[i])) for i in np.flatnonzero(count)}
    got = {n: (c, t) for n, c, t in zip(lb.table["name"], lb.table["count"], lb.table["total_ns"])}
    assert got == want
    assert b.total_kernel_ns == int(total.sum())

    # per-iteration samples (summed over GPUs): launches exact, ns within the stored mantissa's error
    # (``mantissa.SAMPLE_BITS`` significant bits: exact below 2^(bits+1) ns)
    from kbase.store.codec.mantissa import SAMPLE_BITS

    per_iter_c = truth.iter_count.sum(axis=0)  # [iteration, name]
    per_iter_t = truth.iter_total.sum(axis=0)
    want_s = {(truth.names[i], k + 1): (int(per_iter_c[k, i]), float(per_iter_t[k, i]))
              for k in range(1, ITERATIONS) for i in np.flatnonzero(per_iter_c[k])}
    got_s = samples
    assert got_s.keys() == want_s.keys()
    assert all(got_s[k][0] == want_s[k][0] for k in want_s)
    for key, (_, t) in want_s.items():
        bound = 0.0 if t < 2 ** (SAMPLE_BITS + 1) else t * 2.0 ** -(SAMPLE_BITS + 1)
        assert abs(got_s[key][1] - t) <= bound, (key, got_s[key][1], t)
