"""PyTorch profiler traces through the whole pipeline: attribution, top, snapshot, diff, gate.

The per-step numbers are checked against an independent computation over the raw JSON: each
kernel → its launch event (``args.correlation``) → the CPU ``ProfilerStep#N`` range of the same
process containing the launch's timestamp. The reader's own raw-JSON checks live in
``test_read_kineto.py``.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.shared import KINETO_DIR, SHARED_SKIP_REASON

pytestmark = pytest.mark.slow

TRACES = sorted(KINETO_DIR.glob("*.json.gz")) if KINETO_DIR.is_dir() else []
W0 = KINETO_DIR / "v100_resnet50_workers0.pt.trace.json.gz"
W4 = KINETO_DIR / "v100_resnet50_workers4.pt.trace.json.gz"


def _need_shared():
    if not TRACES:
        pytest.skip(SHARED_SKIP_REASON)


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh, parse_float=Decimal)
    return doc["traceEvents"] if isinstance(doc, dict) else doc


def _ns(x) -> int:
    return int((Decimal(str(x)) * 1000).to_integral_value())


def independent_steps(path: Path) -> dict[int, tuple[int, int]]:
    """Step number -> (kernels, kernel ns), by launch correlation and the enclosing CPU step."""
    ev = _events(path)
    cat = lambda e: str(e.get("cat", "")).lower()  # noqa: E731
    launches = {}
    for e in ev:
        if cat(e) in ("cuda_runtime", "runtime", "cuda_driver") and e.get("ph") == "X":
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launches[corr] = (e["pid"], _ns(e["ts"]))
    steps = defaultdict(list)
    for e in ev:
        if e.get("ph") == "X" and cat(e) in ("user_annotation", "operator", "cpu_op") \
                and str(e.get("name", "")).startswith("ProfilerStep#"):
            steps[e["pid"]].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), int(e["name"].split("#")[1])))
    out: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for e in ev:
        if cat(e) != "kernel":
            continue
        corr = (e.get("args") or {}).get("correlation")
        if corr not in launches:
            continue
        pid, t = launches[corr]
        for lo, hi, n in steps.get(pid, []):
            if lo <= t < hi:
                out[n][0] += 1
                out[n][1] += _ns(e["dur"])
                break
    return {k: tuple(v) for k, v in out.items()}


@pytest.mark.parametrize("trace", TRACES, ids=[t.name for t in TRACES])
def test_per_step_counts_and_time_equal_independent_join(trace):
    from kbase.analysis.iterations import attribute
    from kbase.readers import read_profile

    p = read_profile(trace)
    it = attribute(p)
    dur = (p.kernels["end"] - p.kernels["start"]).to_numpy()
    got: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for key, d in zip(it.kernel_iteration, dur):
        if key >= 0:
            got[int(key)][0] += 1
            got[int(key)][1] += int(d)
    assert {k: tuple(v) for k, v in got.items()} == independent_steps(trace)


def test_top_snapshot_diff_gate_accept_kineto(tmp_path):
    _need_shared()
    trace = KINETO_DIR / "v100_ns_resolution.pt.trace.json.gz"
    top = run_kbase("top", str(trace), "--format", "json", "--limit", "0")
    assert top.rc == 0, top.stderr
    doc = json.loads(top.stdout)
    assert doc["summary"]["format"] == "kineto" and doc["summary"]["aligned"]
    db = f"sqlite:///{tmp_path / 's.db'}"
    snap = run_kbase("snapshot", str(trace), "--db", db, "--no-git", "--rev", "a" * 40, "--format", "json")
    assert snap.rc == 0, snap.stderr
    bid = json.loads(snap.stdout)["baseline_id"]
    shown = json.loads(run_kbase("show", f"@{bid}", "--db", db, "--format", "json", "--limit", "0").stdout)
    assert [k["name"] for k in shown["kernels"]] == [k["name"] for k in doc["kernels"]]
    diff = run_kbase("diff", f"@{bid}", str(trace), "--db", db, "--format", "json")
    assert diff.rc == 0, diff.stderr
    kinds = {k["class"] for k in json.loads(diff.stdout)["kernels"]}
    assert kinds == {"unchanged"}
    assert run_kbase("gate", f"@{bid}", str(trace), "--db", db).rc == 0
    same = run_kbase("gate", f"@{bid}", f"@{bid}", "--db", db)  # issue 12: one baseline on both sides
    assert same.rc == 2 and "same baseline" in same.stderr, same


@pytest.mark.parametrize("trace", TRACES, ids=[t.name for t in TRACES])
def test_trace_diffed_with_itself_flags_nothing(trace):
    res = run_kbase("diff", str(trace), str(trace), "--format", "json")
    assert res.rc == 0, res.stderr
    doc = json.loads(res.stdout)
    assert {k["class"] for k in doc["kernels"]} == {"unchanged"}
    assert run_kbase("gate", str(trace), str(trace)).rc == 0


# A directory of per-rank traces of one run, through the CLI: tests/readers/test_reader_multirank.py
# (test_real_run_through_the_cli_has_a_gpu_per_rank); traces of different runs are refused there.


def test_dataloader_workers_pair_reads_as_step_time_not_kernel_time():
    """ResNet-50, DataLoader workers 0 vs 4: the GPU work is the same, the input pipeline is not.

    Kernel time per step moves about 1%, the CPU step time drops by about a fifth, and cuDNN
    picked other convolution algorithms: those show as launch-count changes and new/gone
    kernels within the convolution ops, reported as an algorithm swap in each op (judged by the op's
    time, not per kernel) — and the default gate passes.
    """
    if not (W0.exists() and W4.exists()):
        pytest.skip(SHARED_SKIP_REASON)
    res = run_kbase("diff", str(W0), str(W4), "--format", "json")
    assert res.rc == 0, res.stderr
    doc = json.loads(res.stdout)
    t = doc["totals"]
    assert abs(t["kernel"]["delta_pct"]) < 3
    assert -25 < t["step_wall"]["delta_pct"] < -15
    rows = doc["kernels"]
    assert any(r["match"] == "new" for r in rows) and any(r["match"] == "gone" for r in rows)
    swaps = [r for r in rows if r["swap"]]
    assert len(swaps) >= 4
    assert any(abs(r["delta_count"]) >= 0.5 for r in swaps) and any(r["match"] in ("new", "gone") for r in swaps)
    # a changed kernel of a swap is "swapped", never "regressed" (issue 38)
    assert not [r for r in swaps if r["class"] in ("regressed", "regressed_below_floor", "new", "gone")]
    swapped_ops = {o["op"] for o in doc["ops"] if o["reshuffled"]}
    assert swapped_ops and {r["op"] for r in swaps} <= swapped_ops  # every swapped kernel is in a swapped op
    assert all(r["diagnosis"].startswith("algorithm swap") for r in swaps)
    assert any("algorithm swap" in n for n in doc["notes"])
    gate = run_kbase("gate", str(W0), str(W4), "--format", "json")
    assert gate.rc == 0, gate.stdout[-2000:]
