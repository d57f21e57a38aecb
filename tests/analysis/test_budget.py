"""The GPU time budget (``analysis.budget``) against an independent sweep written here.

The check is a different algorithm from kbase's (a counter sweep over start/end events in plain Python, not a
union of sorted intervals): each instant goes to the highest class active then, compute > communication >
memory > idle. Every real capture (../shared/data and tests/data/kineto) and generated exports must agree
exactly, in integer ns, per GPU over the whole capture; per iteration the blocks must add up to the window and
the iterations tile each GPU's window.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kbase.analysis import classify
from kbase.analysis.budget import BLOCKS, FIELDS, budget_from_stored, category_codes, compute_budget
from kbase.analysis.spec import WindowSpec
from kbase.analysis.window import select_window
from kbase.readers import read_profile

from helpers.cli import run_kbase
from helpers.shared import KINETO_DIR, NSYS_DIR, SHARED_SKIP_REASON, shared_present

REPO = Path(__file__).resolve().parents[2]
LOCAL = sorted((REPO / "tests" / "data" / "kineto").glob("*.json.gz"))


def _real() -> list:
    if not shared_present():
        return [pytest.param(None, id="no-shared-data", marks=pytest.mark.skip(reason=SHARED_SKIP_REASON))]
    paths = sorted(NSYS_DIR.glob("*.sqlite")) + sorted(KINETO_DIR.glob("*.json.gz"))
    return [pytest.param(p, id=p.name) for p in paths]


def independent_blocks(intervals: list[tuple[int, int, int]], lo: int, hi: int) -> dict[str, int]:
    """(start, end, class) intervals -> the four blocks and the overlapped times over [lo, hi), by a counter sweep:
    at each event the active counts per class decide who owns the time until the next event."""
    events: list[tuple[int, int, int]] = []
    for s, e, c in intervals:
        s, e = max(s, lo), min(e, hi)
        if e > s:
            events.append((s, 1, c))
            events.append((e, -1, c))
    events.sort()
    active = [0, 0, 0]
    owned = [0, 0, 0, 0]  # compute, communication, memory, idle
    running = [0, 0, 0]  # time each class was active at all
    t = lo
    for when, step, c in events + [(hi, 0, 0)]:
        span = when - t
        if span > 0:
            top = next((k for k in range(3) if active[k] > 0), 3)
            owned[top] += span
            for k in range(3):
                if active[k]:
                    running[k] += span
        t = max(t, when)
        active[c] += step
    return {"compute_ns": owned[0], "communication_exposed_ns": owned[1], "memory_exposed_ns": owned[2],
            "idle_ns": owned[3], "communication_overlapped_ns": running[1] - owned[1],
            "memory_overlapped_ns": running[2] - owned[2], "window_ns": hi - lo}


def _profile_and_categories(path: Path):
    profile = read_profile(path, allow_missing_ranks=True)
    kinds = classify.kinds_of(profile.columns.names.tolist(), profile.short_names)
    return profile, category_codes([k[2] for k in kinds])


def _intervals(profile, cats: np.ndarray, gpu: int) -> list[tuple[int, int, int]]:
    k, a = profile.columns, profile.activities
    mine = k.gpu == gpu
    out = list(zip(k.start[mine].tolist(), k.end[mine].tolist(), cats[k.name[mine]].tolist()))
    am = a.gpu == gpu
    out += [(s, e, 2) for s, e in zip(a.start[am].tolist(), a.end[am].tolist())]
    return out


def check_whole(path: Path) -> None:
    profile, cats = _profile_and_categories(path)
    window = select_window(profile, WindowSpec(allow_missing_ranks=True))
    b = compute_budget(window, cats, whole=True)
    assert b.gpus
    for g in b.gpus:
        ivs = _intervals(profile, cats, g.gpu)
        lo, hi = min(s for s, _, _ in ivs), max(e for _, e, _ in ivs)
        want = independent_blocks(ivs, lo, hi)
        got = g.blocks.as_dict()
        assert {f: got[f] for f in FIELDS} == want, (path.name, g.gpu)
        assert sum(got[k] for k in BLOCKS) == got["window_ns"]


def check_iterations(path: Path) -> None:
    profile, cats = _profile_and_categories(path)
    window = select_window(profile, WindowSpec(allow_missing_ranks=True))
    b = compute_budget(window, cats)
    if b.unit != "iteration":
        return
    assert len(b.iterations) == len(window.iteration_keys)
    for g in b.gpus:
        assert sum(x.window_ns for _, x in g.iterations) == g.blocks.window_ns
        for key, x in g.iterations:
            assert sum(getattr(x, k) for k in BLOCKS) == x.window_ns, (path.name, g.gpu, key)
            assert min(getattr(x, f) for f in FIELDS) >= 0
        # the busy time of the whole tiled span equals the independent sweep's over the same span
        start = min(s for s, _, _ in _intervals(profile, cats, g.gpu))
        del start
    total = sum(getattr(b.total, k) for k in BLOCKS)
    assert total == b.total.window_ns


@pytest.mark.parametrize("path", _real())
def test_real_capture_budget_matches_independent_sweep(path):
    check_whole(path)
    check_iterations(path)


@pytest.mark.parametrize("path", [pytest.param(p, id=p.name) for p in LOCAL])
def test_committed_traces_budget_matches_independent_sweep(path):
    check_whole(path)
    check_iterations(path)


def test_generated_export_budget(tmp_path):
    from kbase.synth.generate import generate_export

    path = tmp_path / "gen.sqlite"
    generate_export(path, n_gpus=2, iterations=6)
    check_whole(path)
    check_iterations(path)
    profile, cats = _profile_and_categories(path)
    b = compute_budget(select_window(profile, WindowSpec()), cats)
    # the generator runs NCCL on a second stream after compute: some of it hides under compute
    assert b.total.communication_overlapped_ns > 0
    assert b.step_source == "host"
    assert len(profile.syncs) > 0 and len(profile.activities) > 0


def test_iteration_windows_tile_per_gpu(tmp_path):
    """Per iteration windows on each GPU are consecutive: iteration k starts where k-1 ended."""
    from kbase.synth.generate import generate_export

    path = tmp_path / "gen.sqlite"
    generate_export(path, n_gpus=2, iterations=5)
    profile, cats = _profile_and_categories(path)
    window = select_window(profile, WindowSpec())
    b = compute_budget(window, cats)
    for g in b.gpus:
        ivs = _intervals(profile, cats, g.gpu)
        # the span: from the warm-up's last GPU work to the last iteration's; the independent sweep over it
        it = window.iteration
        mine = profile.columns.gpu == g.gpu
        warm = mine & (it == window.available_keys[0])
        last = mine & (it == window.iteration_keys[-1])
        lo, hi = int(profile.columns.end[warm].max()), int(profile.columns.end[last].max())
        want = independent_blocks(ivs, lo, hi)
        got = g.blocks.as_dict()
        assert {f: got[f] for f in FIELDS} == want


def test_stored_round_trip():
    path = LOCAL[0]
    profile, cats = _profile_and_categories(path)
    b = compute_budget(select_window(profile, WindowSpec()), cats)
    back = budget_from_stored(json.loads(json.dumps(b.to_stored())))
    assert back.total == b.total
    assert back.iterations == b.iterations
    assert back.step_samples() == b.step_samples()


def test_cli_budget_json_schema_and_sum():
    path = LOCAL[0]
    r = run_kbase("budget", str(path), "--format", "json")
    assert r.rc == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "kbase.budget/1" and doc["unit"] == "iteration"
    fields = {"gpu", "rank", "window_ns", "compute_ns", "communication_exposed_ns", "communication_overlapped_ns",
              "memory_exposed_ns", "memory_overlapped_ns", "idle_ns", "step_wall_ns", "iterations"}
    for g in doc["gpus"]:
        assert fields <= set(g)
        for it in g["iterations"]:
            assert it["window_ns"] == sum(it[k] for k in BLOCKS)
    assert doc["total"]["window_ns"] == sum(doc["total"][k] for k in BLOCKS)
    r = run_kbase("budget", str(path), "--window", "all", "--format", "json")
    assert r.rc == 0 and json.loads(r.stdout)["unit"] == "window"


@pytest.mark.parametrize("args", [["budget", "no-such-file.sqlite"], ["budget", "LOCAL", "--window", "sideways"],
                                  ["budget", "LOCAL", "--format", "xml"]])
def test_cli_budget_bad_input(args, tmp_path):
    args = [str(LOCAL[0]) if a == "LOCAL" else a for a in args]
    r = run_kbase(*args)
    assert r.rc == 2
    assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("seed", range(6))
def test_union_covered_before_each_instant_equals_a_merge(seed):
    """The sweep's union (``_piece_starts`` of the running end ``_reach``) and its coverage before each window
    edge (``_covered``, summing only the stretches between edges) equal a plain merge of the intervals, with edges
    before, between and after them, and repeated edges; odd seeds: a serial stream (ends ascending)."""
    from kbase.analysis.budget_sweep import _covered, _piece_starts, _reach

    rng = np.random.default_rng(seed)
    s = np.sort(rng.integers(0, 20_000, 400)).astype(np.int64)
    e = s + rng.integers(0, 300, 400)
    if seed % 2:
        e = np.minimum(e, np.r_[s[1:], e[-1]])
        assert (e[1:] >= e[:-1]).all()
    mask = rng.random(400) < 0.7
    t = np.sort(np.r_[rng.integers(-500, 21_000, 30), s[rng.integers(0, 400, 5)], [-1, -1, 25_000]]).astype(np.int64)
    merged: list[list[int]] = []
    for a, b in zip(s[mask].tolist(), e[mask].tolist()):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    want = [sum(max(0, min(b, x) - a) for a, b in merged) for x in t.tolist()]
    reach = _reach(e[mask])
    ps = _piece_starts(s[mask], reach)
    assert _covered(ps, reach, t).tolist() == want
