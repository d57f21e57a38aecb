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
``process_names`` {pid key: name}.

The file is streamed: events are decoded one at a time into compact columns, so memory stays a
small multiple of the kernels + ranges kept, not of the JSON text.
"""

from __future__ import annotations

import json
import os
import re
from array import array
from pathlib import Path

import numpy as np
import pandas as pd

from kbase.errors import InputError
from kbase.readers.kineto_json import _events, _ns, _open_text, _Stream, _trace_files_in, looks_like_kineto
from kbase.readers.profile import Profile

__all__ = ["looks_like_kineto", "read_kineto"]


_KERNEL_CATS = {"kernel"}
_LAUNCH_CATS = {"cuda_runtime", "runtime", "cuda_driver"}
_RANGE_CATS = {"user_annotation", "cpu_op", "operator"}
_FLOW_CATS = {"ac2g", "async"}
_STEP_RE = re.compile(r"ProfilerStep#\d+\Z")

_SLOT_SHIFT_TID = 48
_PID_SHIFT = 24
_SLOT_SHIFT_PID = 24
_ID_LIMIT = 1 << 23  # OS ids below this are kept as they are
_LOW48 = (1 << 48) - 1
_LOW24 = (1 << 24) - 1
_MAX_RANK = (1 << 15) - 1


# --------------------------------------------------------------------------------------------
# one file


class _Ids:
    """OS pid/tid -> the small codes used in the keys (see the module docstring)."""

    def __init__(self):
        self.pids: dict = {}
        self.tids: dict = {}
        self.cache: dict = {}

    @staticmethod
    def _plain(v):
        if type(v) is str:
            s = v.strip()
            if s.lstrip("-").isdigit():
                return int(s)
        return v

    def pid_code(self, pid) -> int:
        pid = self._plain(pid)
        if type(pid) is int and 0 <= pid < _ID_LIMIT:
            return pid
        code = self.pids.get(pid)
        if code is None:
            code = self.pids[pid] = _ID_LIMIT + len(self.pids)
        return code

    def key(self, pid, tid) -> int:
        """Thread key without the slot bits."""
        try:
            return self.cache[(pid, tid)]
        except (KeyError, TypeError):
            pass
        pc = self.pid_code(pid)
        t = self._plain(tid)
        if type(t) is int and 0 <= t < _ID_LIMIT:
            tc = t
        else:
            tc = self.tids.get((pc, t))
            if tc is None:
                tc = self.tids[(pc, t)] = _ID_LIMIT + sum(1 for k in self.tids if k[0] == pc)
        k = (pc << _PID_SHIFT) | tc
        try:
            self.cache[(pid, tid)] = k
        except TypeError:
            pass
        return k


class _FileData:
    __slots__ = (
        "path", "label", "meta", "k_start", "k_end", "k_dev", "k_corr", "k_names",
        "k_nocorr", "r_start", "r_end", "r_tid", "r_names", "l_corr", "l_tid", "l_ts",
        "fs_id", "fs_tid", "fs_ts", "ff_id", "ff_tid", "ff_ts", "trace_span",
        "thread_names", "process_names", "rank",
    )  # fmt: skip


def _corr_of(args: dict):
    c = args.get("correlation")
    if c is None:
        for k in ("correlation id", "correlationId", "correlation_id", "Correlation"):
            c = args.get(k)
            if c is not None:
                break
    return c if type(c) is int else None


def _read_one(path: Path) -> _FileData:
    label = str(path)
    meta: dict = {}
    fd = _FileData()
    fd.path, fd.label, fd.meta = path, label, meta
    k_start, k_end, k_dev, k_corr = array("q"), array("q"), array("q"), array("q")
    k_names: list[str] = []
    k_nocorr: list[tuple[int, int, int]] = []  # (kernel index, lane key, ts) for the flow fallback
    r_start, r_end, r_tid = array("q"), array("q"), array("q")
    r_names: list[str] = []
    l_corr, l_tid, l_ts = array("q"), array("q"), array("q")
    fs_id, fs_tid, fs_ts = array("q"), array("q"), array("q")
    ff_id, ff_tid, ff_ts = array("q"), array("q"), array("q")
    open_ranges: dict[int, list[int]] = {}
    thread_names: dict[int, str] = {}
    process_names: dict[int, str] = {}
    trace_span = [None, None]
    names: dict[str, str] = {}
    cats: dict = {}
    ids = _Ids()
    key = ids.key

    ev_decoder = json.JSONDecoder(parse_float=str)  # keep fractional µs as text: exact ns
    meta_decoder = json.JSONDecoder()
    read, close = _open_text(path, label)
    stream = _Stream(read, label)
    n_events = 0
    try:
        for ev in _events(stream, meta, ev_decoder, meta_decoder):
            if type(ev) is not dict:
                continue
            n_events += 1
            cat = ev.get("cat")
            if cat is None:
                if ev.get("ph") == "M":
                    nm = ev.get("name")
                    a = ev.get("args")
                    if isinstance(a, dict) and isinstance(a.get("name"), str):
                        if nm == "thread_name":
                            thread_names[key(ev.get("pid"), ev.get("tid"))] = a["name"]
                        elif nm == "process_name":
                            process_names[ids.pid_code(ev.get("pid"))] = a["name"]
                continue
            try:
                lc = cats[cat]
            except (KeyError, TypeError):
                lc = cat.lower() if isinstance(cat, str) else ""
                try:
                    cats[cat] = lc
                except TypeError:
                    pass
            ph = ev.get("ph")
            try:
                if lc in _KERNEL_CATS:
                    if ph != "X":
                        continue
                    args = ev.get("args")
                    if not isinstance(args, dict):
                        args = {}
                    ts = _ns(ev.get("ts"))
                    k_start.append(ts)
                    k_end.append(ts + _ns(ev.get("dur")))
                    dev = args.get("device")
                    if type(dev) is not int:
                        dev = ev.get("pid") if type(ev.get("pid")) is int else 0
                    k_dev.append(dev)
                    corr = _corr_of(args)
                    if corr is None:
                        k_nocorr.append((len(k_corr), key(ev.get("pid"), ev.get("tid")), ts))
                        corr = -1
                    k_corr.append(corr)
                    nm = ev.get("name")
                    if not isinstance(nm, str):
                        nm = args.get("name") if isinstance(args.get("name"), str) else "<unnamed kernel>"
                    k_names.append(names.setdefault(nm, nm))
                elif lc in _LAUNCH_CATS:
                    args = ev.get("args")
                    corr = _corr_of(args) if isinstance(args, dict) else None
                    if corr is not None and ph == "X":
                        l_corr.append(corr)
                        l_tid.append(key(ev.get("pid"), ev.get("tid")))
                        l_ts.append(_ns(ev.get("ts")))
                elif lc in _RANGE_CATS:
                    nm = ev.get("name")
                    nm = names.setdefault(nm, nm) if isinstance(nm, str) else str(nm)
                    if ph == "X":
                        ts = _ns(ev.get("ts"))
                        r_start.append(ts)
                        r_end.append(ts + _ns(ev.get("dur")))
                        r_tid.append(key(ev.get("pid"), ev.get("tid")))
                        r_names.append(nm)
                    elif ph == "B":
                        t = key(ev.get("pid"), ev.get("tid"))
                        open_ranges.setdefault(t, []).append(len(r_start))
                        r_start.append(_ns(ev.get("ts")))
                        r_end.append(-1)
                        r_tid.append(t)
                        r_names.append(nm)
                    elif ph == "E":
                        stack = open_ranges.get(key(ev.get("pid"), ev.get("tid")))
                        if stack:
                            r_end[stack.pop()] = _ns(ev.get("ts"))
                elif lc in _FLOW_CATS:
                    fid = ev.get("id")
                    if type(fid) is not int:
                        continue
                    if ph == "s":
                        fs_id.append(fid)
                        fs_tid.append(key(ev.get("pid"), ev.get("tid")))
                        fs_ts.append(_ns(ev.get("ts")))
                    elif ph == "f":
                        ff_id.append(fid)
                        ff_tid.append(key(ev.get("pid"), ev.get("tid")))
                        ff_ts.append(_ns(ev.get("ts")))
                elif lc == "trace" and ph == "X":
                    ts = _ns(ev.get("ts"))
                    end = ts + _ns(ev.get("dur"))
                    trace_span[0] = ts if trace_span[0] is None else min(trace_span[0], ts)
                    trace_span[1] = end if trace_span[1] is None else max(trace_span[1], end)
            except (ValueError, OverflowError) as e:
                raise InputError(f"{label}: bad {cat!r} event ({e})") from None
    finally:
        close()

    if n_events == 0 and meta.get("_format") == "list":
        raise InputError(f"{label}: JSON but not a PyTorch profiler trace (no trace events)")
    if not len(k_start):
        raise InputError(f"{label}: PyTorch profiler trace without GPU kernel events (CPU-only capture?)")

    fd.k_start, fd.k_end, fd.k_dev, fd.k_corr, fd.k_names = k_start, k_end, k_dev, k_corr, k_names
    fd.k_nocorr = k_nocorr
    fd.r_start, fd.r_end, fd.r_tid, fd.r_names = r_start, r_end, r_tid, r_names
    fd.l_corr, fd.l_tid, fd.l_ts = l_corr, l_tid, l_ts
    fd.fs_id, fd.fs_tid, fd.fs_ts = fs_id, fs_tid, fs_ts
    fd.ff_id, fd.ff_tid, fd.ff_ts = ff_id, ff_tid, ff_ts
    fd.trace_span = trace_span
    fd.thread_names, fd.process_names = thread_names, process_names
    return fd


def _launches(fd: _FileData) -> tuple[np.ndarray, np.ndarray]:
    """launch_tid / launch_start (slot bits not yet set) for each kernel of one file."""
    n = len(fd.k_corr)
    corr = np.frombuffer(fd.k_corr, dtype=np.int64).copy() if n else np.empty(0, np.int64)
    if fd.k_nocorr and len(fd.ff_id):
        by_lane = {}
        for fid, lane, ts in zip(fd.ff_id, fd.ff_tid, fd.ff_ts):
            by_lane.setdefault((lane, ts), fid)
        for i, lane, ts in fd.k_nocorr:
            fid = by_lane.get((lane, ts))
            if fid is not None:
                corr[i] = fid
    # launch records: API calls first, flow starts only where no API call carries the id
    l_corr = np.concatenate([np.frombuffer(fd.l_corr, np.int64), np.frombuffer(fd.fs_id, np.int64)])
    l_tid = np.concatenate([np.frombuffer(fd.l_tid, np.int64), np.frombuffer(fd.fs_tid, np.int64)])
    l_ts = np.concatenate([np.frombuffer(fd.l_ts, np.int64), np.frombuffer(fd.fs_ts, np.int64)])
    launch_tid = np.full(n, -1, dtype=np.int64)
    launch_start = np.full(n, -1, dtype=np.int64)
    if len(l_corr):
        _, first = np.unique(l_corr, return_index=True)  # first occurrence = API call when both exist
        lc, lt, ls = l_corr[first], l_tid[first], l_ts[first]  # sorted by correlation
        pos = np.searchsorted(lc, corr)
        pos_c = np.minimum(pos, len(lc) - 1)
        hit = (corr >= 0) & (lc[pos_c] == corr)
        launch_tid[hit] = lt[pos_c[hit]]
        launch_start[hit] = ls[pos_c[hit]]
    return launch_tid, launch_start


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
    return b if type(b) is int else 0


# --------------------------------------------------------------------------------------------
# public entry point


def _resolve(paths) -> tuple[list[Path], Path]:
    if isinstance(paths, (str, os.PathLike)):
        p = Path(paths)
        if p.is_dir():
            files = [f for f in _trace_files_in(p) if looks_like_kineto(f)]
            if not files:
                raise InputError(f"{p}: no PyTorch profiler traces (.json / .json.gz) in this directory")
            return files, p
        return [p], p
    files: list[Path] = []
    for item in paths:
        item = Path(item)
        if item.is_dir():
            files.extend(_resolve(item)[0])
        else:
            files.append(item)
    if not files:
        raise InputError("no PyTorch profiler trace given")
    if len(files) == 1:
        return files, files[0]
    try:
        source = Path(os.path.commonpath([str(f.resolve()) for f in files]))
    except ValueError:
        source = files[0]
    return files, source


def read_kineto(paths: Path | list[Path]) -> Profile:
    """Read one Kineto trace, or several (a directory or a list: one rank per file) as one profile."""
    files, source = _resolve(paths)
    data = [_read_one(f) for f in files]

    # ranks: distributedInfo.rank where given, file order (first unused numbers) otherwise
    declared = [_declared_rank(fd.meta) for fd in data]
    taken: dict[int, str] = {}
    for fd, r in zip(data, declared):
        if r is None:
            continue
        if r in taken:
            raise InputError(f"{fd.label}: rank {r} again (also in {taken[r]}); these traces are not one run")
        taken[r] = fd.label
    free = (r for r in range(_MAX_RANK + 1) if r not in taken)
    for fd, r in zip(data, declared):
        fd.rank = r if r is not None else next(free)
    data.sort(key=lambda fd: fd.rank)
    if len(data) > _MAX_RANK + 1:
        raise InputError(f"{source}: more than {_MAX_RANK + 1} traces")

    kernel_parts, range_parts, gpu_rows = [], [], []
    step_wall: dict[int, dict[str, int]] = {}
    step_walls_by_number: dict[int, list[int]] = {}
    thread_names: dict[int, str] = {}
    process_names: dict[int, str] = {}
    span_lo, span_hi = [], []
    versions: list[str] = []
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
                vals, counts = np.unique(launch_tid[sel] >> _PID_SHIFT, return_counts=True)
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

        r_start = np.frombuffer(fd.r_start, dtype=np.int64) + base
        r_end_raw = np.frombuffer(fd.r_end, dtype=np.int64)
        r_end = np.where(r_end_raw >= 0, r_end_raw + base, -1)
        r_tid = np.frombuffer(fd.r_tid, dtype=np.int64) | tid_bits
        r_pid = r_tid >> _PID_SHIFT
        range_parts.append((r_start, r_end, r_tid, r_pid, fd.r_names))

        steps: dict[str, int] = {}
        for nm, s, e in zip(fd.r_names, r_start.tolist(), r_end.tolist()):
            if e >= 0 and _STEP_RE.match(nm):
                steps[nm] = steps.get(nm, 0) + (e - s)
        step_wall[rank] = steps
        for nm, wall in steps.items():
            step_walls_by_number.setdefault(int(nm.rsplit("#", 1)[1]), []).append(wall)

        for k, v in fd.thread_names.items():
            thread_names[k | (slot << _SLOT_SHIFT_TID)] = v
        for k, v in fd.process_names.items():
            process_names[k | (slot << _SLOT_SHIFT_PID)] = v
        if fd.trace_span[0] is not None:
            span_lo.append(fd.trace_span[0] + base)
            span_hi.append(fd.trace_span[1] + base)
        span_lo.append(int(start.min()))
        span_hi.append(int(end.max()))
        versions.append(_exporter_version(fd.meta))
        # drop the per-file columns as soon as they are copied
        fd.k_start = fd.k_end = fd.k_dev = fd.k_corr = fd.r_start = fd.r_end = fd.r_tid = None
        fd.l_corr = fd.l_tid = fd.l_ts = fd.fs_id = fd.fs_tid = fd.fs_ts = None
        fd.ff_id = fd.ff_tid = fd.ff_ts = fd.k_nocorr = None

    all_names = [n for part in kernel_parts for n in part[3]]
    kernels = pd.DataFrame(
        {
            "start": np.concatenate([p[0] for p in kernel_parts]),
            "end": np.concatenate([p[1] for p in kernel_parts]),
            "gpu": np.concatenate([p[2] for p in kernel_parts]).astype(np.int32),
            "name": pd.Categorical(all_names),
            "launch_tid": np.concatenate([p[4] for p in kernel_parts]),
            "launch_start": np.concatenate([p[5] for p in kernel_parts]),
        }
    )
    del all_names, kernel_parts
    kernels = kernels.sort_values(["start", "gpu"], kind="stable", ignore_index=True)

    ranges = pd.DataFrame(
        {
            "start": np.concatenate([p[0] for p in range_parts]).astype(np.int64),
            "end": np.concatenate([p[1] for p in range_parts]).astype(np.int64),
            "tid": np.concatenate([p[2] for p in range_parts]).astype(np.int64),
            "pid": np.concatenate([p[3] for p in range_parts]).astype(np.int64),
            "name": pd.Series([n for p in range_parts for n in p[4]], dtype=object),
        }
    )
    del range_parts
    ranges = ranges.sort_values(["start"], kind="stable", ignore_index=True)

    gpus = pd.DataFrame(
        {
            "gpu": pd.Series([r[0] for r in gpu_rows], dtype="int32"),
            "pid": pd.Series([r[1] for r in gpu_rows], dtype="int64"),
            "device": pd.Series([r[2] for r in gpu_rows], dtype="int32"),
            "model": pd.Series([r[3] for r in gpu_rows], dtype=object),
        }
    )

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
                "world_size": (fd.meta.get("distributedInfo") or {}).get("world_size")
                if isinstance(fd.meta.get("distributedInfo"), dict)
                else None,
                "trace_name": fd.meta.get("traceName") if isinstance(fd.meta.get("traceName"), str) else None,
                "base_time_ns": _base_ns(fd.meta),
            }
            for slot, fd in enumerate(data)
        ],
        "thread_names": thread_names,
        "process_names": process_names,
    }
    return Profile(
        source=source,
        format="kineto",
        exporter_version=" | ".join(uniq_versions),
        kernels=kernels,
        ranges=ranges,
        gpus=gpus,
        capture_start=min(span_lo),
        capture_end=max(span_hi),
        extra=extra,
    )
