"""The noise model on real captures (skipped without ../shared/data): an A/A pair, injected slowdowns,
an Nsight Systems export without step markers, and a DataLoader change with cuDNN algorithm swaps."""

import json
import shutil
import sqlite3

import numpy as np
import pytest

from helpers.cli import kb
from helpers.shared import SHARED, SHARED_SKIP_REASON

KINETO = SHARED / "kineto"
AA = [KINETO / f"v100_resnet50_w4_repeat_{x}.pt.trace.json.gz" for x in "ab"]
DETECTED = ("regressed", "regressed_below_floor")  # significant; the gate fails on the first only (min_effect_pct)


def _need(*paths):
    for p in paths:
        if not p.is_file():
            pytest.skip(f"{p} not present: {SHARED_SKIP_REASON}")


@pytest.fixture(scope="module")
def aa_profiles():
    _need(*AA)
    import kbase

    s = kbase.Settings.load()
    return s, [kbase.read(p, s) for p in AA]


@pytest.mark.slow
def test_aa_pair_both_ways_flags_nothing_and_passes(tmp_path):
    _need(*AA)
    for x, y in (AA, AA[::-1]):
        r = kb("gate", x, y, "--db", f"sqlite:///{tmp_path / 's.db'}", "--format", "json")
        assert r.rc == 0, r
        doc = json.loads(r.stdout)
        assert doc["counts"]["regressed"] == 0 and doc["counts"]["improved"] == 0
        assert doc["verdict"]["status"] == "pass"
        k = doc["kernels"][0]
        assert {"mde_rel", "mde_ns", "noise_source", "z"} <= set(k)
        assert any(n.startswith("noise: ") for n in doc["notes"])


def test_three_percent_on_top_kernels_is_flagged_and_ranked_first(aa_profiles):
    import kbase
    from kbase.comparison.diff import compute_diff
    from kbase.comparison.side import side_from_leaderboards

    s, (pa, pb) = aa_profiles
    before = side_from_leaderboards([kbase.leaderboard(kbase.window(pa, s), sketches=True)], "a")
    top = kbase.leaderboard(kbase.window(pb, s), sketches=True).table["name"].head(3).tolist()
    k = pb.columns  # the profile's own arrays: the window reads these
    end0 = k.end.copy()
    for name in top:
        m = k.names[k.name] == name
        end = end0.copy()
        end[m] = k.start[m] + np.rint((end0[m] - k.start[m]) * 1.03).astype(end.dtype)
        k.end = end
        try:
            after = side_from_leaderboards([kbase.leaderboard(kbase.window(pb, s), sketches=True)], "b")
        finally:
            k.end = end0
        rows = compute_diff(before, after, s.policy).rows
        assert rows.iloc[0]["name"] == name and rows.iloc[0]["class"] in DETECTED, rows.head(3)
        assert rows["class"].isin(DETECTED).sum() == 1
        assert rows.iloc[0]["mde_rel"] < 0.03
        # practical significance: gated exactly when the effect on the iteration reaches min_effect_pct
        assert (rows.iloc[0]["class"] == "regressed") == (rows.iloc[0]["effect"] >= s.policy.min_effect_pct / 100)
        assert rows.iloc[0]["gated"] == (rows.iloc[0]["class"] == "regressed")


def test_nsys_without_markers_top_kernel_ten_percent_fails(tmp_path):
    src = SHARED / "nsys" / "h100_2gpu_fsdp_t5.sqlite"
    _need(src)
    slow = tmp_path / "slow.sqlite"
    shutil.copyfile(src, slow)
    con = sqlite3.connect(slow)
    top, = con.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY demangledName "
                       "ORDER BY SUM(end - start) DESC LIMIT 1").fetchone()
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + CAST(ROUND((end - start) * 1.1) AS INTEGER) "
                "WHERE demangledName = ?", (top,))
    con.commit()
    name, = con.execute("SELECT value FROM StringIds WHERE id = ?", (top,)).fetchone()
    con.close()
    db = f"sqlite:///{tmp_path / 's.db'}"
    r = kb("gate", src, slow, "--db", db, "--format", "json")
    assert r.rc == 1, r
    doc = json.loads(r.stdout)
    assert not doc["after"]["aligned"]
    row = next(k for k in doc["kernels"] if k["name"] == name)
    # +10% of a kernel holding ~1.6% of the window's GPU time: significant, +0.16% of it, under the gate floor;
    # the gate fails on the total rule (kernel time +6.9%)
    assert row["class"] in DETECTED and row["noise_source"] in ("launches", "iterations")
    assert doc["verdict"]["failing"] == ["(total kernel time per iteration)"]
    same = kb("gate", src, src, "--db", db, "--format", "json")
    assert same.rc == 0, same


@pytest.mark.slow
def test_workers0_vs_workers4_passes_with_the_swap_reported(tmp_path):
    a, b = (KINETO / f"v100_resnet50_workers{n}.pt.trace.json.gz" for n in (0, 4))
    _need(a, b)
    r = kb("gate", a, b, "--db", f"sqlite:///{tmp_path / 's.db'}", "--format", "json")
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    assert any(n.startswith("algorithm swap") for n in doc["notes"])
    assert all(k["swap"] or k["class"] != "regressed" for k in doc["kernels"])
