"""What one Kineto trace file is read into (``_FileData``: packed int64 columns per kind of event), the event
categories kbase reads, and the checks an event's fields pass before they are data (``kineto_file._read_one``
reads the file with these)."""

from __future__ import annotations

from array import array
from pathlib import Path

from kbase.readers.kineto_json import _ns
from kbase.readers.profile import ACTIVITY_MEMCPY, ACTIVITY_MEMSET, RANGE_ANNOTATION, RANGE_MODULE, RANGE_OP

_KERNEL_CATS = {"kernel"}
# GPU activities other than kernels (the budget's memory block): current and 2021 category names
_ACTIVITY_CATS = {"gpu_memcpy": ACTIVITY_MEMCPY, "memcpy": ACTIVITY_MEMCPY, "gpu_memset": ACTIVITY_MEMSET,
                  "memset": ACTIVITY_MEMSET}
_LAUNCH_CATS = {"cuda_runtime", "runtime", "cuda_driver"}
# range categories and their kind: annotations, framework ops, module scopes (``nn.Module: X`` only)
_RANGE_CATS = {"user_annotation": RANGE_ANNOTATION, "cpu_op": RANGE_OP, "operator": RANGE_OP,
               "python_function": RANGE_MODULE}
_MODULE_PREFIX = "nn.Module: "
_FLOW_CATS = {"ac2g", "async"}

_TS_LIMIT = 1 << 62  # ns: beyond this a timestamp is not a time (and base + ts would overflow int64)
MAX_KERNEL_NS = (1 << 40) - 1  # the leaderboard keeps durations in 40 bits (about 18 minutes)
MAX_DEVICE = (1 << 15) - 1


class _FileData:
    """One trace file's events as packed int64 columns (filled by :func:`_read_one`)."""

    __slots__ = (
        "a_corr", "a_dev", "a_end", "a_kind", "a_start", "s_end", "s_start", "s_tid",
        "ff_id", "ff_tid", "ff_ts", "fs_id", "fs_tid", "fs_ts", "k_corr", "k_dev", "k_end", "k_names",
        "k_nocorr", "k_start", "l_corr", "l_tid", "l_ts", "label", "meta", "notes", "path", "process_names",
        "r_end", "r_kind", "r_names", "r_start", "r_tid", "rank", "thread_names", "trace_span",
    )  # fmt: skip
    path: Path
    label: str
    meta: dict
    rank: int
    notes: list[str]
    k_start: array[int]
    k_end: array[int]
    k_dev: array[int]
    k_corr: array[int]
    k_names: list[str]
    k_nocorr: list[tuple[int, int, int]]
    r_start: array[int]
    r_end: array[int]
    r_tid: array[int]
    r_kind: array[int]
    r_names: list[str]
    l_corr: array[int]
    l_tid: array[int]
    l_ts: array[int]
    fs_id: array[int]
    fs_tid: array[int]
    fs_ts: array[int]
    ff_id: array[int]
    ff_tid: array[int]
    ff_ts: array[int]
    thread_names: dict[int, str]
    process_names: dict[int, str]
    trace_span: list[int | None]
    a_start: array[int]  # memcpy / memset
    a_end: array[int]
    a_dev: array[int]
    a_corr: array[int]
    a_kind: array[int]
    s_start: array[int]  # host calls blocked on the GPU
    s_end: array[int]
    s_tid: array[int]


_CORR_LIMIT = 1 << 62


# Host calls that wait for the GPU: the GPU can go idle while the host sits in one (``analysis.budget``).
_SYNC_PREFIXES = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaCtxSynchronize",
                  "cuStreamSynchronize", "cuCtxSynchronize", "cuEventSynchronize")


def is_sync_call(name: str) -> bool:
    """A CUDA runtime/driver call that blocks the host until the GPU catches up: the synchronize calls and the
    blocking copies (``cudaMemcpy``, ``cudaMemcpy2D``..., not the ``Async`` ones)."""
    if name.startswith(_SYNC_PREFIXES):
        return True
    base = name.split("_v", 1)[0]  # nsys names carry the API version: cudaMemcpy_v3020
    return base.startswith(("cudaMemcpy", "cuMemcpy")) and "Async" not in base


def _corr_of(args: dict) -> int | None:
    c = args.get("correlation")
    if c is None:
        for k in ("correlation id", "correlationId", "correlation_id", "Correlation"):
            c = args.get(k)
            if c is not None:
                break
    return c if type(c) is int and 0 <= c < _CORR_LIMIT else None


def _ns_ok(v) -> int | None:
    """µs -> ns like :func:`_ns`, or None when ``v`` is missing, not a number or not a plausible time."""
    if type(v) is int:
        n = v * 1000
    elif v is None or type(v) is bool:
        return None
    else:
        try:
            n = _ns(v)
        except (ValueError, OverflowError, TypeError):
            return None
    return n if -_TS_LIMIT < n < _TS_LIMIT else None


def _span_flaw(ts: int | None, dur: int | None) -> str | None:
    """Why an X event's (ts, dur) cannot be used, or None."""
    if ts is None:
        return "without a valid ts"
    if dur is None:
        return "without a valid dur"
    if dur < 0:
        return "with a negative dur"
    if dur > MAX_KERNEL_NS:
        return "running longer than 18 minutes"
    return None


class _Flaws:
    """Counts of events left out, by kind of event and reason."""

    def __init__(self):
        self.by_kind: dict[str, dict[str, int]] = {}

    def add(self, kind: str, why: str) -> None:
        reasons = self.by_kind.setdefault(kind, {})
        reasons[why] = reasons.get(why, 0) + 1

    def total(self, kind: str) -> int:
        return sum(self.by_kind.get(kind, {}).values())
