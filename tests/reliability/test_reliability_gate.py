"""Issue #6, gate robustness: the gate never passes on a candidate that measured nothing, refuses
a candidate with far fewer iterations or another unit (iteration-aligned vs not), and never fails
a baseline diffed with itself — on many export shapes, the real shared exports and both backends.

Already covered in ``tests/test_gate.py`` (not repeated): incomparable GPU count / window spec and
``--allow-incomparable`` (``test_exit_2_incomparable_then_allowed``), 3 vs 7 iterations
(``test_exit_2_far_fewer_iterations``), ``@N`` vs ``@N`` on one generated workload
(``test_baseline_diffed_with_itself``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export, scaled_kernel_mix

from helpers.cli import kb
from helpers.shared import KINETO_DIR, SHARED_SKIP_REASON, shared_exports

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

REV1 = "1111111111111111111111111111111111111111"
REV2 = "2222222222222222222222222222222222222222"
# The strictest policy there is: any change at all would fail, so only an exact self-match passes.
STRICT = ("--max-increase-pct", "0", "--abs-floor-us", "0", "--share-floor", "0", "--total-increase-pct", "0",
          "--alpha", "0.99", "--new-kernel", "fail")

SHAPES = {
    "2gpu-default-mix": dict(n_gpus=2, iterations=6, seed=1),
    "1gpu-3-iterations": dict(n_gpus=1, iterations=3, seed=2),  # 2 used: low-confidence territory
    "scaled-300-names": dict(n_gpus=1, iterations=5, seed=3, kernels=scaled_kernel_mix(300, 400)),
    "no-nvtx-not-aligned": dict(n_gpus=1, iterations=4, seed=4, nvtx=False),
    "sliced-capture": dict(n_gpus=2, iterations=5, seed=5, start_mid_iteration=True, slice_cuts_launches=3),
    "start-end-markers": dict(n_gpus=1, iterations=5, seed=6, marker_event_type=60),
    "12-iterations": dict(n_gpus=1, iterations=13, seed=7),
    "3-iterations": dict(n_gpus=1, iterations=4, seed=7),
}


@pytest.fixture(scope="module")
def shapes(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("gate_shapes")
    return {k: generate_export(d / f"{k}.sqlite", ExportSpec(**v)).path for k, v in SHAPES.items()}


def snap(path, db: str, name: str, rev: str = REV1, *extra) -> int:
    r = kb("snapshot", path, "--db", db, "--no-git", "--rev", rev, "--name", name, "--format", "json",
           "--limit", "1", *extra)
    assert r.rc == 0, r
    return json.loads(r.stdout)["baseline_id"]


def assert_self_gate_passes(db: str, path: Path, name: str, policies=(STRICT,)) -> None:
    """The same capture stored at two revisions gates as a pass. Every knob of STRICT is at or beyond the
    default's strictness, so a pass under STRICT implies a pass under the default policy. (Issue 12: the
    former ``kbase gate @N @N`` form is now refused, exit 2: both sides are one baseline.)"""
    bid, other = snap(path, db, name, REV1), snap(path, db, name, REV2)
    r = kb("gate", f"@{bid}", f"@{bid}", "--db", db, "--name", name, "--format", "json")
    assert r.rc == 2 and "same baseline" in r.stderr and r.stdout == "", r
    for extra in policies:
        r = kb("gate", f"@{bid}", f"@{other}", "--db", db, "--name", name, "--format", "json", *extra)
        assert r.rc == 0, r
        doc = json.loads(r.stdout)
        assert doc["comparable"] is True and doc["verdict"]["status"] == "pass", doc["verdict"]
        assert {k["class"] for k in doc["kernels"]} <= {"unchanged"}, doc["counts"]
        assert doc["totals"]["kernel"]["delta_ns"] == 0


@pytest.mark.parametrize("key", list(SHAPES))
def test_self_gate_never_fails_on_generated_shapes(shapes, key, tmp_path):
    db = f"sqlite:///{tmp_path / 'gate.db'}"
    assert_self_gate_passes(db, shapes[key], key, policies=((), STRICT))


@pytest.mark.slow
def test_self_gate_never_fails_on_postgresql(shapes, pg_db_url):
    for key in ("2gpu-default-mix", "no-nvtx-not-aligned", "sliced-capture"):
        assert_self_gate_passes(pg_db_url, shapes[key], key)


def _real_params() -> list:
    paths = shared_exports()
    trace = KINETO_DIR / "h100_qwen05b_chat.json.gz"
    if trace.is_file():
        paths.append(trace)
    if not paths:
        return [pytest.param(None, id="no-shared-data", marks=pytest.mark.skip(reason=SHARED_SKIP_REASON))]
    return [pytest.param(p, id=p.name.split(".")[0]) for p in paths]


@pytest.mark.parametrize("path", _real_params())
def test_self_gate_never_fails_on_real_exports(path, tmp_path):
    db = f"sqlite:///{tmp_path / 'real.db'}"
    assert_self_gate_passes(db, path, "real")


@pytest.mark.slow
def test_far_fewer_iterations_is_incomparable(shapes, store_url):
    """A baseline of 12 iterations against a candidate of 3: exit 2, never a pass or a regression."""
    many = snap(shapes["12-iterations"], store_url, "iters", REV1)
    few = snap(shapes["3-iterations"], store_url, "iters", REV2)
    r = kb("gate", f"@{many}", f"@{few}", "--db", store_url, "--name", "iters", "--format", "json")
    assert r.rc == 2, r
    doc = json.loads(r.stdout)
    assert doc["verdict"]["status"] == "incomparable" and doc["comparable"] is False
    assert any("far fewer iterations (3 per capture)" in m and "(12 per capture)" in m for m in doc["mismatches"]), \
        doc["mismatches"]
    r = kb("gate", f"@{many}", f"@{few}", "--db", store_url, "--name", "iters", "--warn-only")
    assert r.rc == 2, r
    assert "INCOMPARABLE" in r.stdout


def test_aligned_baseline_vs_unaligned_candidate_is_incomparable(tmp_path, store_url):
    """Same workload and window spec, but the candidate has no iteration marker: its numbers are per
    second of window, the baseline's per iteration. Comparing them would invent a +1000 % regression
    (or hide one), so the gate says incomparable, in both directions."""
    aligned = generate_export(tmp_path / "aligned.sqlite", ExportSpec(n_gpus=1, iterations=6, seed=1)).path
    flat = generate_export(tmp_path / "flat.sqlite",
                           ExportSpec(n_gpus=1, iterations=6, seed=2, nvtx=False)).path
    a = snap(aligned, store_url, "mixed", REV1)
    b = snap(flat, store_url, "mixed", REV2)
    for before, after in ((a, b), (b, a)):
        r = kb("gate", f"@{before}", f"@{after}", "--db", store_url, "--name", "mixed", "--format", "json")
        assert r.rc == 2, r
        doc = json.loads(r.stdout)
        assert doc["verdict"]["status"] == "incomparable"
        assert any(m.startswith("iteration alignment differs") for m in doc["mismatches"]), doc["mismatches"]


def _empty_like(lb):
    """The same leaderboard with nothing in its window (the library API allows what the CLI cannot)."""
    from dataclasses import replace

    from kbase.analysis.leaderboard import Leaderboard

    summary = replace(lb.summary, total_kernel_ns=0, compute_ns=0, communication_ns=0, memory_ns=0)
    return Leaderboard(table=lb.table.iloc[0:0].copy(), summary=summary, samples=lb.samples.iloc[0:0].copy(),
                       notes=list(lb.notes))


@pytest.mark.parametrize("aligned", [True, False], ids=["aligned", "not-aligned"])
def test_candidate_with_no_kernels_is_never_a_pass(tmp_path, aligned):
    from kbase.analysis.leaderboard import build_leaderboard
    from kbase.analysis.window import WindowSpec, select_window
    from kbase.comparison.diff import compute_diff
    from kbase.comparison.gate import INCOMPARABLE, REGRESSION, FindingKind, decide
    from kbase.comparison.resolve import Resolved
    from kbase.comparison.result import Comparison
    from kbase.comparison.side import SideMeta, side_from_leaderboards
    from kbase.readers import read_profile
    from kbase.render import diff as render_diff

    path = generate_export(tmp_path / "e.sqlite",
                           ExportSpec(n_gpus=2, iterations=6, seed=3, nvtx=aligned)).path
    lb = build_leaderboard(select_window(read_profile(path), WindowSpec()))
    meta = SideMeta(workload="w", gpu_models=",".join(lb.summary.gpu_models), gpu_count=2,
                    window_spec=WindowSpec().key())
    before = side_from_leaderboards([lb], "before", meta)
    after = side_from_leaderboards([_empty_like(lb)], "after", meta)
    result = compute_diff(before, after)
    assert "candidate window holds no kernels" in result.mismatches
    for kwargs in ({}, {"allow_incomparable": True}, {"warn_only": True},
                   {"allow_incomparable": True, "warn_only": True}):
        v = decide(result, **kwargs)
        assert v.code == INCOMPARABLE and v.status == "incomparable", (kwargs, v)
        assert any("no kernels" in r for r in render_diff.verdict_reasons(v))
    # it renders (every kernel is "gone"), and says why
    comparison = Comparison(result=result, before=Resolved(before, None), after=Resolved(after, None))
    doc = render_diff.diff_doc(comparison, decide(result))
    text = render_diff.diff_json(doc)
    assert json.loads(text)["verdict"]["status"] == "incomparable"
    assert render_diff.diff_md(doc, True, decide(result))
    assert {k["class"] for k in json.loads(text)["kernels"]} == {"gone"}

    # an empty baseline (before) against a real candidate is no pass of an empty window either:
    # every kernel is new and, by default, new kernels above the share floor fail
    r2 = compute_diff(after, before)
    v2 = decide(r2)
    assert set(r2.rows["class"]) == {"new"}
    assert v2.code == REGRESSION and v2.status == "fail", v2
    big = r2.rows.loc[r2.rows["share_after"] >= r2.policy.share_floor, "name"]
    assert len(big) and {f.name for f in v2.failing if f.kind == FindingKind.NEW_KERNEL} == set(big)

