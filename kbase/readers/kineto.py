"""Reader for PyTorch profiler (Kineto) Chrome-trace JSON (``.json`` / ``.json.gz``).

One file is one rank; a directory or a list of files is one multi-rank profile (one GPU row per
(rank, device)). Both trace generations are understood:

* 2021 (PyTorch 1.8 era): a bare JSON list, categories ``Kernel`` / ``Runtime`` / ``Operator``,
  ``async`` flow events named ``launch``, CPU thread ids as decimal strings (``"4093687616"``),
  GPU lanes as ``"stream 7"``; ``ProfilerStep#N`` is an ``Operator`` event.
* current: ``{"schemaVersion": 1, "deviceProperties": [...], "distributedInfo": {...},
  "traceEvents": [...]}``, categories ``kernel`` / ``cuda_runtime`` / ``cuda_driver`` /
  ``cpu_op`` / ``user_annotation`` / ``gpu_user_annotation``, ``ac2g`` flow events;
  ``ProfilerStep#N`` is a ``user_annotation`` (plus a GPU-side ``gpu_user_annotation`` copy, which
  is ignored). Timestamps may be fractional microseconds (ns resolution) and, in recent traces,
  relative to ``baseTimeNanoseconds``; both are converted exactly to integer ns.

Kernels are tied to the CPU call that launched them through ``args.correlation`` (the same value
on the kernel and on its ``cuda_runtime`` / ``cuda_driver`` / ``Runtime`` event), falling back to
the flow events (``ph`` ``s``/``f``, ``id`` = correlation) for kernels without the argument.

Thread and process keys (``launch_tid``, ``ranges.tid``, ``ranges.pid``, ``gpus.pid``)::

    tid = slot << 48 | pid << 24 | tid        pid = tid >> 24 = slot << 24 | pid

``slot`` is the file's position in rank order (``extra["ranks"][slot]``), so a single trace, or the
lowest rank of several, has exactly the ``pid << 24 | tid`` of the contract and the OS pid as
``pid``; the other ranks' keys and pids carry their slot in the high bits, so two ranks never share
a thread or process even when their OS ids are equal (containers). An OS id outside ``[0, 2**23)``
(2021 pthread ids such as 4093687616, negative tids, non-numeric ids) is replaced by ``2**23 + n``,
n numbering such ids in order of appearance in that file (per process for tids).

``extra``: ``step_wall_ns`` {N: CPU wall ns of ``ProfilerStep#N``} (mean over the ranks that have
that step), ``step_wall_ns_by_rank`` {rank: {"ProfilerStep#N": ns}}, ``ranks`` (per file: rank,
slot, file, gpus, world_size, trace_name, base_time_ns), ``thread_names`` {tid key: name},
``process_names`` {pid key: name}, ``missing_ranks`` [{file, reason}] (unreadable ranks left out
under ``allow_missing_ranks``), ``absent_ranks`` (ranks of the declared world with no trace),
``ignored_files`` (JSON files in the directory that are not traces), ``notes`` (every loss).

Each file is streamed (:mod:`kbase.readers.kineto_file`): events are decoded one at a time into
compact columns, so memory stays a small multiple of the kernels + ranges kept, not of the JSON
text. Which files are ranks, and whether they are one run, is :mod:`kbase.readers.kineto_run`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from kbase.errors import InputError
from kbase.readers.integrity import add_note, step_number
from kbase.readers.kineto_file import _launches
from kbase.readers.kineto_ids import PID_SHIFT
from kbase.readers.kineto_json import _ns, looks_like_kineto
from kbase.readers.kineto_run import (
    absent_ranks,
    check_distinct_content,
    check_distinct_files,
    check_one_run,
    ranges_text,
    rank_files,
    read_ranks,
    world_size,
)
from kbase.readers.profile import (
    ActivityColumns,
    GpuColumns,
    KernelColumns,
    Profile,
    RangeColumns,
    SyncColumns,
    name_codes,
)

__all__ = ["_ns", "looks_like_kineto", "read_kineto"]

_STEP_RE = re.compile(r"ProfilerStep#\d+\Z")

_SLOT_SHIFT_TID = 48
_SLOT_SHIFT_PID = 24
_MAX_RANK = (1 << 15) - 1


# --------------------------------------------------------------------------------------------
# names


# --------------------------------------------------------------------------------------------
# metadata helpers


def _find_key(obj, keys: set[str], depth: int = 0):
    if depth > 4:
        return None
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k in keys and isinstance(v, str) and v:
                return v
        for v in obj.values():
            if isinstance(v, (dict, list)):
                found = _find_key(v, keys, depth + 1)
                if found:
                    return found
    elif isinstance(obj, list):
        for v in obj[:50]:
            if isinstance(v, (dict, list)):
                found = _find_key(v, keys, depth + 1)
                if found:
                    return found
    return None


def _exporter_version(meta: dict) -> str:
    parts = []
    if "schemaVersion" in meta:
        parts.append(f"schema {meta['schemaVersion']}")
    torch = _find_key(meta, {"torch_version", "pytorch_version", "pytorchVersion", "torchVersion"})
    if torch:
        parts.append(f"torch {torch}")
    return "kineto " + ", ".join(parts) if parts else "kineto"


def _device_models(meta: dict) -> dict[int, str]:
    out = {}
    props = meta.get("deviceProperties")
    if isinstance(props, list):
        for p in props:
            if isinstance(p, dict) and type(p.get("id")) is int and isinstance(p.get("name"), str):
                out[p["id"]] = p["name"]
    return out


def _declared_rank(meta: dict) -> int | None:
    info = meta.get("distributedInfo")
    if isinstance(info, dict) and type(info.get("rank")) is int and 0 <= info["rank"] <= _MAX_RANK:
        return info["rank"]
    return None


def _base_ns(meta: dict) -> int:
    b = meta.get("baseTimeNanoseconds")
    return b if type(b) is int else 0  # validated by the file reader


def _span(fd) -> tuple[int, int]:
    """The file's capture on the absolute clock (ns): its Trace span and its kernels."""
    base = _base_ns(fd.meta)
    k_start = np.frombuffer(fd.k_start, dtype=np.int64)
    k_end = np.frombuffer(fd.k_end, dtype=np.int64)
    lo, hi = int(k_start.min()), int(k_end.max())
    if fd.trace_span[0] is not None:
        lo, hi = min(lo, fd.trace_span[0]), max(hi, fd.trace_span[1])
    return lo + base, hi + base


# --------------------------------------------------------------------------------------------
# public entry point


def read_kineto(paths: Path | list[Path], allow_missing_ranks: bool = False) -> Profile:
    """Read one Kineto trace, or several (a directory or a list: one rank per file) as one profile.

    A rank that cannot be read is an error unless ``allow_missing_ranks``; then it is left out and
    recorded (``extra["missing_ranks"]`` and a note). Traces of different runs are always refused.
    """
    files, source, ignored = rank_files(paths)
    if len(files) > _MAX_RANK + 1:
        raise InputError(f"{source}: {len(files)} traces, more than {_MAX_RANK + 1}")
    check_distinct_files(files)
    data, missing = read_ranks(files, source, allow_missing_ranks)

    # ranks: distributedInfo.rank where given, file order (first unused numbers) otherwise
    declared = [_declared_rank(fd.meta) for fd in data]
    taken: dict[int, str] = {}
    for fd, r in zip(data, declared):
        if r is None:
            continue
        if r in taken:
            raise InputError(f"{fd.label}: rank {r} again (also in {taken[r]}); these traces are not one run")
        taken[r] = fd.label
    check_distinct_content(data)
    versions = [_exporter_version(fd.meta) for fd in data]
    check_one_run(data, source, [_span(fd) for fd in data], versions, declared)
    free = (r for r in range(_MAX_RANK + 1) if r not in taken)
    for fd, r in zip(data, declared):
        fd.rank = r if r is not None else next(free)
    world, absent = absent_ranks(data, declared)
    data.sort(key=lambda fd: fd.rank)

    kernel_parts: list = []
    activity_parts: list[ActivityColumns] = []
    sync_parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    range_parts: list = []
    gpu_rows: list[tuple] = []
    step_wall: dict[int, dict[str, int]] = {}
    step_walls_by_number: dict[int, list[int]] = {}
    thread_names: dict[int, str] = {}
    process_names: dict[int, str] = {}
    span_lo, span_hi = [], []
    trace_spans: list[list[int] | None] = []  # each file's profiler span ("Trace" events), absolute ns
    notes: list[str] = []
    for slot, fd in enumerate(data):
        rank, base = fd.rank, _base_ns(fd.meta)
        tid_bits = np.int64(slot << _SLOT_SHIFT_TID)
        launch_tid, launch_start = _launches(fd)
        has = launch_tid >= 0
        launch_tid[has] |= tid_bits
        launch_start[has] += base

        dev = np.frombuffer(fd.k_dev, dtype=np.int64)
        models = _device_models(fd.meta)
        devices = sorted(set(dev.tolist()))
        gpu_of = {}
        for d in devices:
            g = len(gpu_rows)
            gpu_of[d] = g
            sel = has & (dev == d)
            if sel.any():
                vals, counts = np.unique(launch_tid[sel] >> PID_SHIFT, return_counts=True)
                pid_key = int(vals[np.argmax(counts)])
            else:
                pid_key = slot << _SLOT_SHIFT_PID
            gpu_rows.append((g, pid_key, int(d), models.get(int(d), "unknown"), rank))
        lut_keys = np.array(devices, dtype=np.int64)
        lut_vals = np.array([gpu_of[d] for d in devices], dtype=np.int32)
        gpu = lut_vals[np.searchsorted(lut_keys, dev)]

        start = np.frombuffer(fd.k_start, dtype=np.int64) + base
        end = np.frombuffer(fd.k_end, dtype=np.int64) + base
        kernel_parts.append((start, end, gpu, fd.k_names, launch_tid, launch_start))
        activity_parts.append(_activities(fd, gpu_of, base, tid_bits))
        s_tid = np.frombuffer(fd.s_tid, dtype=np.int64) | tid_bits
        sync_parts.append((np.frombuffer(fd.s_start, dtype=np.int64) + base,
                           np.frombuffer(fd.s_end, dtype=np.int64) + base, s_tid >> PID_SHIFT))

        r_start = np.frombuffer(fd.r_start, dtype=np.int64) + base
        r_end_raw = np.frombuffer(fd.r_end, dtype=np.int64)
        r_end = np.where(r_end_raw >= 0, r_end_raw + base, -1)
        r_tid = np.frombuffer(fd.r_tid, dtype=np.int64) | tid_bits
        r_pid = r_tid >> PID_SHIFT
        range_parts.append((r_start, r_end, r_tid, r_pid, fd.r_names, np.frombuffer(fd.r_kind, dtype=np.int8)))

        steps: dict[str, int] = {}
        for nm, s, e in zip(fd.r_names, r_start.tolist(), r_end.tolist()):
            if e >= 0 and _STEP_RE.match(nm):
                steps[nm] = steps.get(nm, 0) + (e - s)
        step_wall[rank] = steps
        for nm, wall in steps.items():
            step_walls_by_number.setdefault(step_number(nm.rsplit("#", 1)[1], nm, fd.label), []).append(wall)

        for k, v in fd.thread_names.items():
            thread_names[k | (slot << _SLOT_SHIFT_TID)] = v
        for k, v in fd.process_names.items():
            process_names[k | (slot << _SLOT_SHIFT_PID)] = v
        lo, hi = fd.trace_span
        trace_spans.append([lo + base, hi + base] if lo is not None and hi is not None else None)
        if lo is not None and hi is not None:
            span_lo.append(lo + base)
            span_hi.append(hi + base)
        span_lo.append(int(start.min()))
        span_hi.append(int(end.max()))
        notes += [f"{Path(fd.label).name}: {n}" if len(files) > 1 else n for n in fd.notes]
        # drop the per-file columns as soon as they are copied
        del fd.k_start, fd.k_end, fd.k_dev, fd.k_corr, fd.r_start, fd.r_end, fd.r_tid, fd.r_kind
        del fd.l_corr, fd.l_tid, fd.l_ts, fd.fs_id, fd.fs_tid, fd.fs_ts
        del fd.ff_id, fd.ff_tid, fd.ff_ts, fd.k_nocorr, fd.a_start, fd.a_end, fd.a_dev, fd.a_corr, fd.a_kind
        del fd.s_start, fd.s_end, fd.s_tid

    all_names = [n for part in kernel_parts for n in part[3]]
    distinct, codes = name_codes(all_names)
    del all_names
    start = np.concatenate([p[0] for p in kernel_parts])
    gpu = np.concatenate([p[2] for p in kernel_parts]).astype(np.int32)
    order = np.lexsort((gpu, start))  # by start, then GPU; stable
    kernels = KernelColumns(start=start[order], end=np.concatenate([p[1] for p in kernel_parts])[order],
                            gpu=gpu[order], name=codes[order], names=distinct,
                            launch_tid=np.concatenate([p[4] for p in kernel_parts])[order],
                            launch_start=np.concatenate([p[5] for p in kernel_parts])[order])
    del kernel_parts, start, gpu, codes, order

    r_start = np.concatenate([p[0] for p in range_parts]).astype(np.int64)
    by_start = np.argsort(r_start, kind="stable")
    r_names = np.empty(len(r_start), dtype=object)
    r_names[:] = [n for p in range_parts for n in p[4]]
    ranges = RangeColumns(start=r_start[by_start],
                          end=np.concatenate([p[1] for p in range_parts]).astype(np.int64)[by_start],
                          tid=np.concatenate([p[2] for p in range_parts]).astype(np.int64)[by_start],
                          pid=np.concatenate([p[3] for p in range_parts]).astype(np.int64)[by_start],
                          name=r_names[by_start],
                          kind=np.concatenate([p[5] for p in range_parts]).astype(np.int8)[by_start])
    del range_parts

    gpus = GpuColumns(gpu=np.array([r[0] for r in gpu_rows], dtype=np.int32),
                      pid=np.array([r[1] for r in gpu_rows], dtype=np.int64),
                      device=np.array([r[2] for r in gpu_rows], dtype=np.int32),
                      model=[str(r[3]) for r in gpu_rows])

    uniq_versions = list(dict.fromkeys(versions))
    extra = {
        "step_wall_ns": {
            n: round(sum(walls) / len(walls)) for n, walls in sorted(step_walls_by_number.items())
        },
        "step_wall_ns_by_rank": step_wall,
        "ranks": [
            {
                "rank": fd.rank,
                "slot": slot,
                "file": str(fd.path),
                "gpus": [r[0] for r in gpu_rows if r[4] == fd.rank],
                "world_size": world_size(fd.meta),
                "trace_name": fd.meta.get("traceName") if isinstance(fd.meta.get("traceName"), str) else None,
                "base_time_ns": _base_ns(fd.meta),
            }
            for slot, fd in enumerate(data)
        ],
        "thread_names": thread_names,
        "process_names": process_names,
        "missing_ranks": missing,
        "absent_ranks": absent,
        "ignored_files": [str(f) for f in ignored],
        # what ``analysis.span`` reads: each rank's profiler span, and whether a schedule cut it into steps
        "capture": {"format": "kineto", "trace_spans": trace_spans, "steps": any(step_wall.values())},
    }
    if missing:
        left = "; ".join(m["reason"] for m in missing)
        add_note(extra, f"{len(missing)} of {len(files)} rank traces could not be read and are left out "
                        f"(missing ranks allowed): {left}")
    if absent:
        add_note(extra, f"ranks {ranges_text(absent)} of a world of {world} have no trace in {source}")
    for note in notes:
        add_note(extra, note)
    syncs = SyncColumns(start=np.concatenate([p[0] for p in sync_parts]).astype(np.int64),
                        end=np.concatenate([p[1] for p in sync_parts]).astype(np.int64),
                        pid=np.concatenate([p[2] for p in sync_parts]).astype(np.int64))
    return Profile(
        source=source,
        format="kineto",
        exporter_version=" | ".join(uniq_versions),
        columns=kernels,
        range_columns=ranges,
        gpu_columns=gpus,
        capture_start=min(span_lo),
        capture_end=max(span_hi),
        extra=extra,
        activities=_concat_activities(activity_parts),
        syncs=syncs,
    )


def _activities(fd, gpu_of: dict[int, int], base: int, tid_bits: np.int64) -> ActivityColumns:
    """One file's memcpy/memset on the GPUs that ran kernels (a device without kernels is no GPU of the
    profile), with their launch calls."""
    dev = np.frombuffer(fd.a_dev, dtype=np.int64)
    if not len(dev):
        return ActivityColumns.empty()
    launch_tid, launch_start = _launches(fd, activities=True)
    has = launch_tid >= 0
    launch_tid[has] |= tid_bits
    launch_start[has] += base
    lut = np.full(int(dev.max()) + 1, -1, dtype=np.int32)
    for d, g in gpu_of.items():
        if d < len(lut):
            lut[d] = g
    gpu = lut[dev]
    keep = gpu >= 0
    return ActivityColumns(start=(np.frombuffer(fd.a_start, dtype=np.int64) + base)[keep],
                           end=(np.frombuffer(fd.a_end, dtype=np.int64) + base)[keep], gpu=gpu[keep],
                           kind=np.frombuffer(fd.a_kind, dtype=np.int8)[keep].copy(),
                           launch_start=launch_start[keep], launch_tid=launch_tid[keep])


def _concat_activities(parts: list[ActivityColumns]) -> ActivityColumns:
    if not parts:
        return ActivityColumns.empty()
    start = np.concatenate([p.start for p in parts])
    order = np.argsort(start, kind="stable")
    return ActivityColumns(start=start[order], end=np.concatenate([p.end for p in parts])[order],
                           gpu=np.concatenate([p.gpu for p in parts]).astype(np.int32)[order],
                           kind=np.concatenate([p.kind for p in parts]).astype(np.int8)[order],
                           launch_start=np.concatenate([p.launch_start for p in parts])[order],
                           launch_tid=np.concatenate([p.launch_tid for p in parts])[order])
