"""Op attribution (``kbase.analysis.ops``): the innermost op range around each kernel's launch call.

Held against an independent aggregation of the trace's own events (a plain JSON load, the launch found by
correlation id, the enclosing ops by a loop over time containment on the launching thread) on the shared
PyTorch profiler traces, through ``kbase top --by op`` and ``kbase diff --by op``; and on synthetic ranges
against a brute-force search."""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest

from kbase.analysis.nesting import Nesting, innermost
from kbase.analysis.ops import op_name, scope_name

from helpers.cli import run_kbase
from helpers.shared import KINETO_DIR, NSYS_DIR, SHARED_SKIP_REASON

TRACES = ["v100_resnet50_workers4.pt.trace.json.gz", "v100_resnet50_w4_repeat_a.pt.trace.json.gz",
          "v100_ns_resolution.pt.trace.json.gz", "h100_qwen05b_chat.json.gz"]
STEP = re.compile(r"ProfilerStep#\d+\Z")
MODULE = re.compile(r"nn\.Module: (.*?)(?:_\d+)?\Z")
BACKWARD = "autograd::engine::evaluate_function: "


def need(path: Path) -> Path:
    if not path.is_file():
        pytest.skip(f"{path} not present: {SHARED_SKIP_REASON}")
    return path


# --------------------------------------------------------------------------- names


@pytest.mark.parametrize(("raw", "key"), [
    ("aten::conv2d, seq = 12, op_id = 4, sizes = [[8, 3, 224, 224], [64, 3, 7, 7]]", "aten::conv2d"),
    ("aten::mul, op_id = 314339", "aten::mul"),
    ("CudnnConvolutionBackward0, stashed seq = 7", "CudnnConvolutionBackward0"),
    ("{'mod': 'torch.nn.functional', 'op': 'conv2d', 'args': [{'name': '', 'type': 'tensor'}]}",
     "torch.nn.functional.conv2d"),
    ("fwd, layer 3", "fwd, layer 3"),  # a user's own comma: kept
    ("  forward ", "forward"),
])
def test_op_names_drop_per_call_counters(raw, key):
    assert op_name(raw) == key


def test_scope_names():
    assert scope_name("nn.Module: Qwen2DecoderLayer_17") == "Qwen2DecoderLayer"
    assert scope_name("autograd::engine::evaluate_function: MmBackward0") == "MmBackward0"


# --------------------------------------------------------------------------- the search


def _brute(start, end, scope, t, t_scope):
    out = []
    for q, s in zip(t.tolist(), t_scope.tolist()):
        best = -1
        for i, (a, b, c) in enumerate(zip(start.tolist(), end.tolist(), scope.tolist())):
            if c == s and a <= q < b:
                if best < 0 or (a, -b, i) > (start[best], -end[best], best):
                    best = i
        out.append(best)
    return np.array(out)


@pytest.mark.parametrize("seed", range(6))
def test_innermost_equals_a_brute_force_search(seed):
    """Nested trees per scope (as a thread's op calls), zero-length and identical ranges, launches between
    siblings and outside; then ranges that overlap without nesting (the walk-back path)."""
    rng = np.random.default_rng(seed)
    starts, ends, scopes = [], [], []

    def tree(lo, hi, depth, scope):
        t = lo
        while t < hi and depth < 6:
            a = int(t + rng.integers(0, 40))
            b = int(min(hi, a + rng.integers(0, 400)))
            if a >= hi:
                break
            starts.append(a)
            ends.append(b)
            scopes.append(scope)
            if rng.random() < 0.2:  # the same interval twice (a redispatched op at microsecond resolution)
                starts.append(a)
                ends.append(b)
                scopes.append(scope)
            if b - a > 20:
                tree(a, b, depth + 1, scope)
            t = b
    for scope in (7, 9, 11):
        tree(0, 5000, 0, scope)
    s, e, c = (np.array(x, dtype=np.int64) for x in (starts, ends, scopes))
    t = rng.integers(-10, 5100, 400).astype(np.int64)
    ts = rng.choice([7, 9, 11, 13], 400).astype(np.int64)
    assert (innermost(s, e, c, t, ts) == _brute(s, e, c, t, ts)).all()
    # ranges that never overlap within a scope (NVTX phases, a range per launch): the one-search path
    d_start = np.sort(rng.choice(np.arange(0, 5000, 10), 200, replace=False)).astype(np.int64)
    d_end = d_start + rng.integers(1, 11, 200)
    d_scope = rng.choice([7, 9], 200).astype(np.int64)
    keep = np.ones(200, dtype=bool)
    for sc in (7, 9):  # per scope, drop ranges that would overlap their predecessor
        idx = np.flatnonzero(d_scope == sc)
        keep[idx[1:]] &= d_start[idx[1:]] >= d_end[idx[:-1]]
    ds, de, dc = d_start[keep], d_end[keep], d_scope[keep]
    assert (innermost(ds, de, dc, t, ts) == _brute(ds, de, dc, t, ts)).all()
    # the same launches in (scope, time) order, boundary times included: cut at the boundaries, not searched
    tb = np.concatenate([t, ds, de, de - 1])
    tsb = np.concatenate([ts, dc, dc, dc])
    order = np.lexsort((tb, tsb))
    tb, tsb = tb[order], tsb[order]
    wanted = rng.random(len(tb)) < 0.8
    nest = Nesting(ds, de, dc, values=np.arange(len(ds), dtype=np.int32) * 3)
    want = np.where(wanted, _brute(ds, de, dc, tb, tsb), -1)
    want = np.where(want >= 0, want * 3, -1)
    got = nest.find(tb, tsb, wanted)
    assert got.dtype == np.int32 and got.tolist() == want.tolist()
    shuffled = rng.permutation(len(tb))
    assert nest.find(tb[shuffled], tsb[shuffled], wanted[shuffled]).tolist() == want[shuffled].tolist()
    # ranges overlapping without nesting: the latest-starting one holding the launch
    s2 = rng.integers(0, 1000, 60).astype(np.int64)
    e2 = s2 + rng.integers(1, 300, 60)
    c2 = np.full(60, 7, dtype=np.int64)
    t2 = rng.integers(0, 1300, 200).astype(np.int64)
    got = innermost(s2, e2, c2, t2, np.full(200, 7, dtype=np.int64))
    for q, g in zip(t2.tolist(), got.tolist()):
        holding = [i for i in range(60) if s2[i] <= q < e2[i]]
        assert (g == -1) == (not holding)
        if g >= 0:
            assert s2[g] <= q < e2[g]


# --------------------------------------------------------------------------- real traces


def _ns(v) -> int:
    return int(Decimal(str(v)) * 1000)


def independent_by_op(path: Path) -> dict[str | None, dict[str, list[int]]]:
    """{op key: {kernel name: [launches, total ns]}} of the kernels launched inside a complete ProfilerStep,
    by a plain reading of the trace: the kernel's runtime event (``args.correlation``), the innermost
    ``cpu_op``/``Operator`` event around its start on its thread (latest start, then shortest, then later in
    the file), and its scope: the innermost ``nn.Module`` call, else the autograd node evaluating it."""
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    events = doc if isinstance(doc, list) else doc["traceEvents"]
    cat = lambda e: str(e.get("cat") or "").lower()  # noqa: E731
    ops, modules, steps = defaultdict(list), defaultdict(list), defaultdict(list)
    runtime = {}
    for i, e in enumerate(events):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        c = cat(e)
        if c in ("cpu_op", "operator", "user_annotation") and STEP.match(str(e.get("name"))):
            steps[e["pid"]].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"])))
        elif c in ("cpu_op", "operator"):
            ops[(e["pid"], e["tid"])].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), i, e["name"]))
        elif c == "python_function" and str(e.get("name")).startswith("nn.Module: "):
            modules[(e["pid"], e["tid"])].append((_ns(e["ts"]), _ns(e["ts"]) + _ns(e["dur"]), i, e["name"]))
        elif c in ("cuda_runtime", "runtime", "cuda_driver") and "correlation" in (e.get("args") or {}):
            runtime.setdefault(e["args"]["correlation"], e)

    def inner(ranges, t, pick=lambda name: True):
        best = None
        for a, b, i, name in ranges:
            if a <= t < b and a < b and pick(name) and (best is None or (a, -b, i) > best[:3]):
                best = (a, -b, i, name)
        return None if best is None else best[3]

    out: dict = defaultdict(lambda: defaultdict(lambda: [0, 0]))
    for e in events:
        if not isinstance(e, dict) or cat(e) != "kernel" or e.get("ph") != "X":
            continue
        launch = runtime.get((e.get("args") or {}).get("correlation"))
        if launch is None:
            continue
        t, thread = _ns(launch["ts"]), (launch["pid"], launch["tid"])
        if not any(a <= t < b for a, b in steps[launch["pid"]]):
            continue  # outside every step: not in the window
        op = inner(ops[thread], t, lambda n: not STEP.match(n))
        scope = None
        if op is not None:
            module = inner(modules[thread], t)
            node = inner(ops[thread], t, lambda n: n.startswith(BACKWARD))
            scope = MODULE.match(module).group(1) if module else node[len(BACKWARD):] if node else None
        key = None if op is None else f"{scope}/{op}" if scope else op
        row = out[key][e["name"]]
        row[0] += 1
        row[1] += _ns(e["dur"])
    return out


@pytest.mark.slow  # whole real traces read twice (kbase and the plain-JSON aggregation): ~40 s in all
@pytest.mark.parametrize("trace", TRACES)
def test_top_by_op_equals_an_independent_aggregation(trace):
    path = need(KINETO_DIR / trace)
    r = run_kbase("top", path, "--by", "op", "--format", "json", "--warmup", "0")
    assert r.rc == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "kbase.op_leaderboard/1" and not doc["truncated"]
    got = {o["op"]: {k["name"]: [k["count"], k["total_ns"]] for k in o["kernel_rows"]} for o in doc["ops"]}
    want = independent_by_op(path)
    assert got == {op: dict(ks) for op, ks in want.items()}
    for o in doc["ops"]:  # each op's figures are its kernels' sums
        assert o["count"] == sum(k["count"] for k in o["kernel_rows"])
        assert o["total_ns"] == sum(k["total_ns"] for k in o["kernel_rows"])
    assert sum(o["total_ns"] for o in doc["ops"]) == doc["summary"]["total_kernel_ns"]
    assert [o["total_ns"] for o in doc["ops"]] == sorted((o["total_ns"] for o in doc["ops"]), reverse=True)


def test_top_by_op_formats(monkeypatch):
    path = need(KINETO_DIR / "v100_resnet50_workers4.pt.trace.json.gz")
    md = run_kbase("top", path, "--by", "op", "--format", "md")
    assert md.rc == 0 and "### Kernel leaderboard by op" in md.stdout
    assert "| aten::cudnn\\_convolution\\_backward\\_weight |" in md.stdout and "└ wgrad\\_alg0\\_engine" in md.stdout
    csv = run_kbase("top", path, "--by", "op", "--format", "csv")
    assert csv.rc == 0 and csv.stdout.startswith("op,op_total_ns,op_share_kernel,kernel,")
    monkeypatch.setenv("COLUMNS", "120")
    table = run_kbase("top", path, "--by", "op", "--limit", "2")
    assert table.rc == 0 and "Kernel leaderboard by op" in table.stdout and "truncated: " in table.stdout
    bad = run_kbase("top", path, "--by", "layer")
    assert bad.rc == 2 and "--by 'layer'" in bad.stderr


@pytest.mark.slow  # two real traces, each read by kbase and aggregated again from its JSON events
def test_diff_by_op_equals_an_independent_aggregation(monkeypatch):
    """``kbase diff --by op``: each op's time per iteration on each side is the independent per-op sum over
    the window's iterations."""
    a, b = (need(KINETO_DIR / f"v100_resnet50_workers{n}.pt.trace.json.gz") for n in (0, 4))
    r = run_kbase("diff", a, b, "--by", "op", "--format", "json", "--warmup", "0")
    assert r.rc == 0, r.stderr
    doc = json.loads(r.stdout)
    units = {side: doc[side]["units"] * doc[side]["gpus"] for side in ("before", "after")}
    for side, path in (("before", a), ("after", b)):
        want = {op: sum(v[1] for v in ks.values()) / units[side] for op, ks in independent_by_op(path).items()
                if op is not None}
        got = {o["op"]: o[side] for o in doc["ops"] if o[side]}
        assert got.keys() == want.keys()
        for op, ns in want.items():
            assert got[op] == pytest.approx(ns, rel=1e-9), op
    md = run_kbase("diff", a, b, "--by", "op", "--format", "md")
    assert md.rc == 0 and "### By op" in md.stdout and "(swap) aten::cudnn\\_convolution" in md.stdout
    monkeypatch.setenv("COLUMNS", "120")
    table = run_kbase("diff", a, b, "--by", "op")
    assert table.rc == 0 and "Diff by op" in table.stdout and "MDE" in table.stdout


def test_nsys_emit_nvtx_ops_are_one_key_per_op():
    """An Nsight Systems export with PyTorch ``emit_nvtx`` ranges (``aten::mul, op_id = 314339``): the ops are
    the names without their per-call counters, and every kernel's time is split among them exactly."""
    path = need(NSYS_DIR / "h100_2gpu_fsdp_t5.sqlite")
    r = run_kbase("top", path, "--by", "op", "--format", "json")
    assert r.rc == 0, r.stderr
    doc = json.loads(r.stdout)
    ops = [o["op"] for o in doc["ops"]]
    assert "aten::mm" in ops and not any("op_id" in (o or "") for o in ops)
    assert sum(o["total_ns"] for o in doc["ops"]) == doc["summary"]["total_kernel_ns"]


def test_a_profile_without_op_ranges_says_so(tmp_path):
    from helpers.tiny_export import make_tiny_export

    export = make_tiny_export(tmp_path / "t.sqlite")
    r = run_kbase("top", export, "--by", "op", "--format", "json")
    assert r.rc == 0 and json.loads(r.stdout)["ops"] == []
    assert any("no op information" in n for n in json.loads(r.stdout)["notes"])
