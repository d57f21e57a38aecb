"""kbase.readers.kineto against the real PyTorch profiler traces in ../shared/data/kineto (the small
synthetic traces, which run in a fresh clone too, are in ``test_read_kineto_synthetic.py``).

The reference numbers are computed independently from the raw JSON (json + gzip + Decimal, plain
loops) and compared with what the reader puts in the Profile.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
from collections import defaultdict
from decimal import Decimal
from functools import cache
from pathlib import Path

import pytest

from kbase.errors import InputError
from kbase.readers.kineto import looks_like_kineto, read_kineto

from helpers.kineto_traces import attribute_steps
from helpers.shared import REPO, SHARED  # noqa: E402

KINETO = SHARED / "kineto"
NO_SHARED = "../shared/data not present (fresh clone)"
TRACES = sorted(p.name for p in KINETO.glob("*.json*")) if KINETO.is_dir() else ["<absent>"]

# from ../shared/data/README.md
KNOWN = {
    "v100_resnet50_workers0.pt.trace.json.gz": (9538, [f"ProfilerStep#{i}" for i in range(5, 11)]),
    "v100_resnet50_workers4.pt.trace.json.gz": (9484, [f"ProfilerStep#{i}" for i in range(5, 11)]),
    "v100_ns_resolution.pt.trace.json.gz": (4350, [f"ProfilerStep#{i}" for i in range(101, 106)]),
    "v100_df_index_resolver.json.gz": (19370, [f"ProfilerStep#{i}" for i in range(2, 7)]),
    "a100_rank0_of16.json.gz": (6080, [f"ProfilerStep#{i}" for i in range(550, 555)]),
    "h100_qwen05b_chat.json.gz": (1465, ["ProfilerStep#6"]),
}

STEP = re.compile(r"ProfilerStep#\d+")
LAUNCH_CATS = ("cuda_runtime", "runtime", "cuda_driver")


def _shared_trace(name: str) -> Path:
    if not KINETO.is_dir():
        pytest.skip(NO_SHARED)
    return KINETO / name


@pytest.fixture(params=TRACES)
def trace(request) -> Path:
    return _shared_trace(request.param)


# --------------------------------------------------------------------------------------------
# independent reference, straight from the JSON


def _us_to_ns(v) -> int:
    return int(Decimal(v) * 1000) if not isinstance(v, int) else v * 1000


@cache
def raw_summary(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        doc = json.load(fh, parse_float=Decimal)
    if isinstance(doc, dict):
        events, base = doc["traceEvents"], doc.get("baseTimeNanoseconds", 0)
    else:
        events, base = doc, 0

    kernels, launches, steps = [], {}, []
    for e in events:
        cat = str(e.get("cat", "")).lower()
        if cat == "kernel" and e.get("ph") == "X":
            kernels.append(e)
        elif cat in LAUNCH_CATS and e.get("ph") == "X":
            launches[e["args"]["correlation"]] = (e["pid"], str(e["tid"]), _us_to_ns(e["ts"]))
        elif cat != "gpu_user_annotation" and e.get("ph") == "X" and STEP.fullmatch(str(e.get("name"))):
            start = _us_to_ns(e["ts"])
            steps.append((e["name"], e["pid"], str(e["tid"]), start, start + _us_to_ns(e["dur"])))

    per_name = defaultdict(lambda: [0, 0])
    starts = []
    per_step = defaultdict(lambda: [0, 0])
    unattributed = 0
    no_launch = 0
    for k in kernels:
        dur = _us_to_ns(k["dur"])
        per_name[k["name"]][0] += 1
        per_name[k["name"]][1] += dur
        starts.append(_us_to_ns(k["ts"]) + base)
        launch = launches.get(k["args"].get("correlation"))
        if launch is None:
            no_launch += 1
            unattributed += 1
            continue
        pid, tid, ts = launch
        for name, s_pid, s_tid, s_start, s_end in steps:
            if s_pid == pid and s_tid == tid and s_start <= ts < s_end:
                per_step[name][0] += 1
                per_step[name][1] += dur
                break
        else:
            unattributed += 1
    return {
        "n": len(kernels),
        "per_name": {k: tuple(v) for k, v in per_name.items()},
        "starts": sorted(starts),
        "per_step": {k: tuple(v) for k, v in per_step.items()},
        "unattributed": unattributed,
        "no_launch": no_launch,
        "step_wall": {name: e - s for name, _, _, s, e in steps},
    }


@cache
def profile_of(path: Path):
    return read_kineto(path)


# --------------------------------------------------------------------------------------------
# real traces


@pytest.mark.slow
def test_kernels_match_raw_json(trace):
    prof = profile_of(trace)
    ref = raw_summary(trace)
    k = prof.kernels
    assert len(k) == ref["n"]
    if trace.name in KNOWN:
        assert len(k) == KNOWN[trace.name][0]
    g = k.assign(dur=k["end"] - k["start"]).groupby("name", observed=True)["dur"].agg(["size", "sum"])
    got = {str(name): (int(row["size"]), int(row["sum"])) for name, row in g.iterrows()}
    assert got == ref["per_name"]
    # exact ns timestamps (the ns-resolution trace has fractional µs)
    assert sorted(k["start"].tolist()) == ref["starts"]
    assert int((k["launch_tid"] < 0).sum()) == ref["no_launch"]
    assert ((k["launch_tid"] < 0) == (k["launch_start"] < 0)).all()


@pytest.mark.slow
def test_contract_dtypes(trace):
    prof = profile_of(trace)
    k, r, g = prof.kernels, prof.ranges, prof.gpus
    assert list(k.columns) == ["start", "end", "gpu", "name", "launch_tid", "launch_start"]
    assert [str(t) for t in k.dtypes] == ["int64", "int64", "int32", "category", "int64", "int64"]
    assert list(r.columns) == ["start", "end", "tid", "pid", "name"]
    assert [str(t) for t in r.dtypes[:4]] == ["int64"] * 4
    assert list(g.columns) == ["gpu", "pid", "device", "model"]
    assert set(k["gpu"]) <= set(g["gpu"])
    assert (k["end"] >= k["start"]).all()
    assert prof.format == "kineto" and prof.exporter_version.startswith("kineto")
    # Kineto has no short names of its own: the one shortener (kbase.analysis.names) derives them
    assert prof.short_names == {}
    lo, hi = prof.span()
    assert lo <= k["start"].min() and hi >= k["end"].max()
    # no GPU-side copies of the annotations among the CPU ranges
    launched = set(k.loc[k["launch_tid"] >= 0, "launch_tid"])
    assert launched, "no kernel found its launch call"


@pytest.mark.slow
def test_steps_match_raw_json(trace):
    prof = profile_of(trace)
    ref = raw_summary(trace)
    per_step, unattributed = attribute_steps(prof)
    assert per_step == ref["per_step"]
    assert unattributed == ref["unattributed"]
    assert sum(c for c, _ in per_step.values()) + unattributed == len(prof.kernels)
    (rank,) = prof.extra["step_wall_ns_by_rank"]
    assert prof.extra["step_wall_ns_by_rank"][rank] == ref["step_wall"]
    # what the store reads: {step number: wall ns}
    assert prof.extra["step_wall_ns"] == {int(n.split("#")[1]): v for n, v in ref["step_wall"].items()}
    if trace.name in KNOWN:
        assert sorted(ref["step_wall"], key=lambda s: int(s.split("#")[1])) == KNOWN[trace.name][1]
    steps = prof.ranges[prof.ranges["name"].str.fullmatch(r"ProfilerStep#\d+")]
    assert len(steps) == len(ref["step_wall"])  # the gpu_user_annotation copies are not ranges


def test_markers_available():
    prof = profile_of(_shared_trace("v100_ns_resolution.pt.trace.json.gz"))
    names = set(prof.ranges["name"])
    assert {"## forward ##", "## backward ##", "Optimizer.step#SGD.step"} <= names
    assert prof.gpus["model"].tolist() == ["Tesla V100-SXM2-32GB"]
    # 2021 format: no deviceProperties, string thread ids
    old = profile_of(_shared_trace("v100_resnet50_workers0.pt.trace.json.gz"))
    assert old.gpus["model"].tolist() == ["unknown"]
    assert old.exporter_version == "kineto"
    assert "ProfilerStep#5" in set(old.ranges["name"])
    # a lone trace of rank 1 keeps the contract's pid << 24 | tid (the rank is in extra)
    r1 = profile_of(_shared_trace("v100_df_index_resolver.json.gz"))
    assert r1.gpus["pid"].tolist() == [783658] and r1.gpus["device"].tolist() == [1]
    assert r1.extra["ranks"][0]["rank"] == 1 and r1.extra["ranks"][0]["world_size"] == 2
    assert set(r1.kernels["launch_tid"]) == {(783658 << 24) | 783658, (783658 << 24) | 785244}


@pytest.mark.slow
def test_traces_of_two_runs_in_one_directory_are_refused(tmp_path):
    """A rank 1 of 2 and a rank 0 of 16 are not one run: refused, naming both world sizes (issue 12).
    Coherent multi-rank directories are read rank by rank in tests/readers/test_reader_multirank.py."""
    a = _shared_trace("v100_df_index_resolver.json.gz")  # rank 1 of 2
    b = _shared_trace("a100_rank0_of16.json.gz")  # rank 0 of 16
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(a, run / a.name)
    shutil.copy(b, run / b.name)
    with pytest.raises(InputError, match=r"traces of different runs \(world size 2 in .*, 16 in "):
        read_kineto(run)


@pytest.mark.slow
def test_same_rank_twice_is_an_error(tmp_path):
    a = _shared_trace("a100_rank0_of16.json.gz")
    shutil.copy(a, tmp_path / "x.json.gz")
    shutil.copy(a, tmp_path / "y.json.gz")
    with pytest.raises(InputError, match="rank 0"):
        read_kineto(tmp_path)


def test_sniffing_real_traces(trace):
    assert looks_like_kineto(trace)


@pytest.mark.slow
def test_memory_is_bounded():
    """The reader streams: peak RSS growth stays far below the uncompressed JSON size."""
    import subprocess
    import sys

    path = _shared_trace("v100_df_index_resolver.json.gz")
    # VmHWM (peak RSS of this process image); ru_maxrss would carry over the forking parent's peak
    code = (
        "import sys\n"
        "from kbase.readers.kineto import read_kineto\n"
        "def status(key):\n"
        "    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith(key))\n"
        "r0 = status('VmRSS')\n"
        "p = read_kineto(sys.argv[1])\n"
        "print(status('VmHWM') - r0)\n"
    )
    if not Path("/proc/self/status").exists():
        pytest.skip("needs /proc")
    root = REPO
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True, cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    peak_kib = int(out.stdout.strip())
    with gzip.open(path, "rb") as fh:
        size = sum(len(b) for b in iter(lambda: fh.read(1 << 20), b""))
    assert peak_kib * 1024 < size  # json.load alone would need ~5x the text size
