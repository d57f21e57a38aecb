"""A diff of stored baselines decides what the diff of the same captures read live decides: the store keeps
every leaderboard value exactly and the per-iteration samples and launch sketches as mantissa codes
(``store.kernel_blobs``: <= 2^-11 and 2^-9 relative), and every decision weighs the within-capture noise
together with the run-to-run floor (``Policy.run_noise``, 0.2% a capture), which is several times the
codes' error. Pure noise, small and large slowdowns of one kernel, a slower iteration, captures without
step markers: the same classes, flags and gate. What may differ, measured here: for a kernel whose two
within-capture estimates are within a few % of each other, which of them is reported ("noise_source"), and
its standard error, so MDE and p, by up to ~8% (both estimates lie under the floor then)."""

from __future__ import annotations

import numpy as np
import pytest

import kbase
from kbase.comparison.diff import compute_diff
from kbase.comparison.side import side_from_captures, side_from_leaderboards
from kbase.store import open_store
from kbase.store.read.reader import load_capture
from kbase.synth.generate import ExportSpec, default_kernel_mix, generate_export

GEMM = default_kernel_mix()[0].name
FLASH = next(k.name for k in default_kernel_mix() if k.name.startswith("void flash::flash_fwd"))
CAPTURES = {
    "base": ExportSpec(seed=1, iterations=10),
    "noise": ExportSpec(seed=2, iterations=10),
    "gemm+3%": ExportSpec(seed=3, iterations=10, slowdown={GEMM: 1.03}),
    "flash+10%": ExportSpec(seed=4, iterations=10, slowdown={FLASH: 1.10}),
    "all+5%": ExportSpec(seed=5, iterations=10, slowdown={k.name: 1.05 for k in default_kernel_mix()}),
    "plain": ExportSpec(seed=6, iterations=10, nvtx=False),
    "plain+10%": ExportSpec(seed=7, iterations=10, nvtx=False, slowdown={GEMM: 1.10}),
}
PAIRS = [("base", "noise"), ("base", "gemm+3%"), ("base", "flash+10%"), ("noise", "all+5%"), ("plain", "plain+10%")]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """name -> (live Leaderboard with sketches, its stored baseline id), and the settings of the store."""
    root = tmp_path_factory.mktemp("storeddiff")
    settings = kbase.Settings.load(db=f"sqlite:///{root / 'kb.db'}", name="w")
    out = {}
    with open_store(settings) as st:
        for i, (name, spec) in enumerate(CAPTURES.items()):
            path = root / f"c{i}.sqlite"
            generate_export(path, spec)
            live = kbase.leaderboard(kbase.window(kbase.read(path, settings), settings), sketches=True)
            bid = kbase.snapshot(path, settings, rev=f"{i + 1:040x}", no_git=True, store=st).baseline.id
            out[name] = (live, bid)
    return out, settings


@pytest.mark.parametrize("pair", PAIRS, ids=["-".join(p) for p in PAIRS])
def test_stored_and_live_diffs_decide_alike(both, pair):
    caps, settings = both
    policy = settings.policy
    live = compute_diff(side_from_leaderboards([caps[pair[0]][0]], "a"), side_from_leaderboards([caps[pair[1]][0]], "b"),
                        policy)
    with open_store(settings, readonly=True) as st:
        reader = st.reader
        sides = [side_from_captures([load_capture(reader, reader.baseline(caps[k][1]))], k) for k in pair]
    stored = compute_diff(sides[0], sides[1], policy)
    a, b = live.rows.set_index("name"), stored.rows.set_index("name")
    assert a.index.tolist() == b.index.tolist()  # the same order: by effect on the iteration
    assert a["class"].tolist() == b["class"].tolist()
    assert (a["noise_source"] != b["noise_source"]).sum() <= max(1, len(a) // 10)
    for c in ("before", "after", "delta_ns", "delta_pct", "effect"):  # from the leaderboards' totals: exact
        np.testing.assert_array_equal(a[c].to_numpy(float), b[c].to_numpy(float), err_msg=c)
    x, y = a["mde_rel"].to_numpy(float), b["mde_rel"].to_numpy(float)
    np.testing.assert_array_equal(np.isfinite(x), np.isfinite(y))
    np.testing.assert_allclose(y[np.isfinite(x)], x[np.isfinite(x)], rtol=0.10, err_msg=str(pair))
    z_live, z_stored = a["z"].to_numpy(float), b["z"].to_numpy(float)
    ok = np.isfinite(z_live)
    assert (np.abs(z_stored[ok] - z_live[ok]) <= np.maximum(0.5, 0.1 * np.abs(z_live[ok]))).all(), pair
    assert live.totals.kernel.regressed == stored.totals.kernel.regressed
    flagged = a.index[a["class"].isin(["regressed", "regressed_below_floor", "improved"])].tolist()
    if pair[1] == "noise":
        assert flagged == []
    elif pair[1] in ("gemm+3%", "plain+10%"):
        assert flagged == [GEMM]
    elif pair[1] == "flash+10%":
        assert flagged == [FLASH]
