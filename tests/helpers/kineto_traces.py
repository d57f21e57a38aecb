"""Small, valid PyTorch profiler (Kineto) traces for the reader tests, one rank per file.

``make_trace`` writes the current format (``schemaVersion``, ``distributedInfo``,
``baseTimeNanoseconds``, ``user_annotation`` ProfilerStep#N ranges, ``cuda_runtime`` launches and
``kernel`` events tied by ``args.correlation``). Kernel timings differ per rank, as on real GPUs,
so two ranks never hold identical kernels.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
from pathlib import Path

BASE_NS = 1_700_000_000_000_000_000
KERNELS = ("void gemm_kernel<float>(float*)", "relu_kernel")
STEP_US = 1000


def trace_doc(rank: int = 0, world: int | None = 2, steps: int = 4, *, base_ns: int | None = BASE_NS,
              markers: bool = True, pid: int = 4000, job: str | None = None) -> dict:
    """One rank's trace as a JSON-ready dict (``world=None``: no distributedInfo)."""
    tid = pid + 1
    events: list[dict] = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": "python"}}]
    corr = 1
    t = 1000 + rank * 0.001  # µs after the base; the ranks' clocks differ by a few ns
    for step in range(1, steps + 1):
        if markers:
            events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": pid,
                           "tid": tid, "ts": round(t, 3), "dur": 900})
        for j, name in enumerate(KERNELS):
            launch = round(t + 10 + 100 * j, 3)
            events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": pid, "tid": tid,
                           "ts": launch, "dur": 5, "args": {"correlation": corr}})
            events.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": round(launch + 20, 3),
                           "dur": round(50 + 10 * j + 0.007 * rank + 0.001 * step, 3),
                           "args": {"device": 0, "correlation": corr, "stream": 7}})
            corr += 1
        t += STEP_US
    events.append({"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "pid": "Spans",
                   "tid": "PyTorch Profiler", "ts": 500, "dur": round(t, 3)})
    doc: dict = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Fake GPU"}]}
    if world is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    if job is not None:
        doc["tw_job"] = job
    doc["traceEvents"] = events
    doc["traceName"] = f"/tmp/run/rank{rank}.pt.trace.json"
    if base_ns is not None:
        doc["baseTimeNanoseconds"] = base_ns
    return doc


def write_trace(path: Path, doc: dict, gz: bool | None = None) -> Path:
    """Write ``doc``; gzip when ``gz`` (default: when the name ends in .gz)."""
    text = json.dumps(doc)
    if gz if gz is not None else path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.write_text(text, encoding="utf-8")
    return path


def make_trace(path: Path, rank: int = 0, world: int | None = 2, **kw) -> Path:
    return write_trace(path, trace_doc(rank, world, **kw))


def make_run(directory: Path, world: int = 2, gz: bool = False, **kw) -> list[Path]:
    """A directory with one trace per rank of a ``world``-rank run."""
    directory.mkdir(parents=True, exist_ok=True)
    ext = ".json.gz" if gz else ".json"
    return [make_trace(directory / f"rank{r}{ext}", r, world, **kw) for r in range(world)]


def edit(doc: dict, fn) -> dict:
    """A deep copy of ``doc`` changed by ``fn(copy)``."""
    out = copy.deepcopy(doc)
    fn(out)
    return out


def folder_state(folder: Path) -> dict[str, str]:
    """name -> sha256 of every entry under ``folder`` (recursively): a write or a new file shows."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[str(p.relative_to(folder))] = "link->" + str(p.readlink())
        elif p.is_file():
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[str(p.relative_to(folder))] = "dir"
    return out


def attribute_steps(profile) -> tuple[dict, int]:
    """Kernels -> ProfilerStep through the launch call, with pandas (as a consumer would): {step: (kernels,
    ns)} and the kernels left out, an independent reference for the reader."""
    import pandas as pd

    k = profile.kernels
    launched = k[k["launch_tid"] >= 0].sort_values("launch_start")
    r = profile.ranges
    steps = r[r["name"].str.fullmatch(r"ProfilerStep#\d+")].sort_values("start")
    steps = steps.rename(columns={"start": "s_start", "end": "s_end", "name": "step"})
    m = pd.merge_asof(
        launched,
        steps[["s_start", "s_end", "tid", "step"]],
        left_on="launch_start",
        right_on="s_start",
        left_by="launch_tid",
        right_by="tid",
        direction="backward",
    )
    inside = m["step"].notna() & (m["launch_start"] < m["s_end"])
    m = m[inside]
    g = m.assign(dur=m["end"] - m["start"]).groupby("step")["dur"].agg(["size", "sum"])
    per_step = {name: (int(row["size"]), int(row["sum"])) for name, row in g.iterrows()}
    return per_step, len(k) - int(inside.sum())
