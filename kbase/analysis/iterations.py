"""Training iterations, projected from CPU annotation ranges onto GPU kernels.

A kernel belongs to iteration *i* when the CUDA runtime call that launched it started on a thread
inside range *i* (for NVTX start/end ranges: any thread of that process). GPU timestamps are never
used for this: the GPU runs behind the CPU, so a step's last kernels finish after its range ends.

Iteration keys: when every marker range carries a number (``ProfilerStep#12``, ``step 7``) that
number is the key, so two captures of the same run line up step for step; otherwise ranges are
numbered 0, 1, … in order per process. Either way key *k* means the same logical step on every GPU.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

import numpy as np

from kbase.analysis.nesting import cut_in_order
from kbase.enums import AttributionMode
from kbase.errors import WindowError
from kbase.readers.integrity import step_number
from kbase.readers.profile import Profile, RangeColumns

# Tried in order; the first that names any range wins.
AUTO_MARKERS: list[tuple[str, str]] = [
    ("ProfilerStep#N", r"^ProfilerStep#\d+$"),
    ("step N", r"^(?:train(?:ing)?[ _-]?)?step[ _#:=-]*\d+$"),
    ("iteration N", r"^iter(?:ation)?[ _#:=-]*\d+$"),
    ("train_step", r"^(?:train(?:ing)?_step|train_iteration|training_iteration)$"),
]

NOT_IN_ITERATION = -1
_NUMBER = re.compile(r"(\d+)(?!.*\d)")


@dataclass
class MarkerRanges:
    """The closed marker ranges, ordered by (process, start), each with its iteration key."""

    ranges: RangeColumns
    key: np.ndarray  # int64

    def __len__(self) -> int:
        return len(self.key)

    @classmethod
    def empty(cls) -> MarkerRanges:
        return cls(RangeColumns.empty(), np.zeros(0, dtype=np.int64))


@dataclass
class Iterations:
    """Result of attribution: one iteration key per kernel (-1: none) and the ranges used."""

    kernel_iteration: np.ndarray  # int64, aligned with the profile's launches
    keys: list[int]  # sorted distinct iteration keys seen in the profile
    marker: str  # human description: the regex or the auto-detected marker's name
    mode: AttributionMode
    no_launch: int  # kernels whose launch call is not in the capture (sliced export)
    outside: int  # kernels launched outside every iteration range
    ranges: MarkerRanges  # the marker ranges with their key (empty in "kernel"/"none" mode)


def compile_regex(pattern: str, field: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise WindowError(f"not a valid regular expression ({exc})", field=field, value=pattern) from None


def _matching(names: np.ndarray, regex: re.Pattern) -> np.ndarray:
    """Bool mask of the names ``regex`` finds something in (each distinct name searched once)."""
    hit = {n: regex.search(n) is not None for n in dict.fromkeys(names.tolist())}
    return np.fromiter((hit[n] for n in names.tolist()), dtype=bool, count=len(names))


def pick_marker(profile: Profile, marker: str | None) -> tuple[re.Pattern, str] | None:
    """The marker regex to use and how to name it; None when no marker is given or detected."""
    names = profile.range_columns.name
    if marker is not None:
        regex = compile_regex(marker, "marker")
        if not len(names):
            raise WindowError(f"given but {profile.source} has no NVTX/annotation ranges", field="marker", value=marker)
        if not any(regex.search(n) for n in dict.fromkeys(names.tolist())):
            sample = ", ".join(repr(n) for n, _ in Counter(names.tolist()).most_common(5))
            raise WindowError(f"matches no range in {profile.source} (most common ranges: {sample})",
                              field="marker", value=marker)
        return regex, marker
    if not len(names):
        return None
    # One pass over the distinct names with every marker as an alternative (each is anchored at both ends,
    # so a name matching two of them reports the earlier): an export's op ranges run to tens of thousands.
    either = re.compile("|".join(f"(?P<m{i}>{p})" for i, (_, p) in enumerate(AUTO_MARKERS)), re.IGNORECASE)
    best = len(AUTO_MARKERS)
    for n in dict.fromkeys(names.tolist()):
        m = either.match(n)  # every marker starts with ^: match tries position 0 only (search would try all)
        if m is not None and m.lastgroup is not None:
            best = min(best, int(m.lastgroup[1:]))
            if best == 0:
                break
    if best == len(AUTO_MARKERS):
        return None
    label, pattern = AUTO_MARKERS[best]
    return re.compile(pattern, re.IGNORECASE), label


def attribute(profile: Profile, marker: str | None = None, iteration_kernel: str | None = None) -> Iterations:
    k = profile.columns
    launch_start = k.launch_start if k.launch_start is not None else np.full(len(k), -1, dtype=np.int64)
    no_launch = int(np.count_nonzero(launch_start < 0))
    if iteration_kernel is not None:
        return _by_kernel(profile, compile_regex(iteration_kernel, "iteration_kernel"), iteration_kernel, no_launch)
    picked = pick_marker(profile, marker)
    if picked is None:
        it = np.full(len(k), NOT_IN_ITERATION, dtype=np.int64)
        return Iterations(it, [], "", AttributionMode.NONE, no_launch, 0, MarkerRanges.empty())
    regex, label = picked
    r = _key_ranges(profile.range_columns.take(_matching(profile.range_columns.name, regex)), str(profile.source))
    # Step markers cover every thread of their process; other markers (ops) only their own thread.
    step_like = any(re.search(p, str(n), re.IGNORECASE) for n in r.ranges.name[:50] for _, p in AUTO_MARKERS)
    it, outside = _project(profile, r, cross_thread=step_like)
    # Every closed marker range is an iteration, even one that launched nothing (a zero sample).
    keys = sorted(set(r.key.tolist()))  # (np.unique would import numpy.ma: ~14 ms of a small run)
    return Iterations(it, keys, label, AttributionMode.MARKER, no_launch, outside, r)


def _key_ranges(r: RangeColumns, label: str = "profile") -> MarkerRanges:
    """Give each marker range its iteration key; drop ranges that never closed (partial steps). ``label``
    names the file in the error for a step number past ``MAX_STEP_NUMBER``."""
    closed = np.flatnonzero(r.end >= 0)
    r = r.take(closed[np.lexsort((r.start[closed], r.pid[closed]))])  # by (pid, start), stable
    found = [_NUMBER.search(n) for n in r.name.tolist()]
    numbered = len(r) > 0 and all(m is not None for m in found)
    key = np.zeros(len(r), dtype=np.int64)
    if numbered:
        key = np.array([step_number(m.group(1), m.string, label) for m in found if m is not None], dtype=np.int64)
        # Numbers are step ids only if unique within each process and shared across processes
        # (op ids like "aten::linear, op_id = 314300" are neither).
        pairs = set(zip(r.pid.tolist(), key.tolist()))
        numbered = len(pairs) == len(r) and _shared_across(r.pid, key)
    if not numbered:  # 0, 1, ... per process, in start order
        first = np.r_[0, np.flatnonzero(np.diff(r.pid)) + 1] if len(r) else np.zeros(0, dtype=np.int64)
        starts = np.zeros(len(r), dtype=np.int64)
        starts[first] = first
        key = np.arange(len(r), dtype=np.int64) - np.maximum.accumulate(starts) if len(r) else key
    return MarkerRanges(r, key)


def _shared_across(pid: np.ndarray, key: np.ndarray) -> bool:
    sets: dict[int, set[int]] = {}
    for p, k in zip(pid.tolist(), key.tolist()):
        sets.setdefault(p, set()).add(k)
    if len(sets) < 2:
        return True
    common = set.intersection(*sets.values())
    return len(common) >= 0.5 * min(len(s) for s in sets.values())


def _project(profile: Profile, r: MarkerRanges, cross_thread: bool) -> tuple[np.ndarray, int]:
    """Key of the innermost range containing each kernel's launch, on its thread or process; and the number of
    launches with a launch call placed in none.

    With ``cross_thread`` (step markers), a launch from a thread that owns no marker range — the
    autograd backward thread, a data-parallel comm thread — belongs to the step range of its
    process that contains the launch time: a step spans the whole process's work.
    """
    k = profile.columns
    n = len(k)
    out = np.full(n, NOT_IN_ITERATION, dtype=np.int64)
    if n == 0 or k.launch_start is None:
        return out, 0
    launch = k.launch_start
    if not len(r) or k.launch_tid is None:
        return out, int(np.count_nonzero(launch >= 0))
    tid = k.launch_tid
    proc = tid >> 24  # process key of the launching thread (-1 stays negative: no launch)
    threaded = r.ranges.tid >= 0
    thread_r = _subset(r, threaded)
    proc_r = _subset(r, ~threaded)
    if len(thread_r):
        _contain(out, launch, tid, thread_r.ranges.tid, thread_r)
    if len(proc_r):
        _contain(out, launch, proc, proc_r.ranges.pid, proc_r)
    unplaced = np.flatnonzero((out == NOT_IN_ITERATION) & (launch >= 0))
    if not (cross_thread and len(thread_r)):
        return out, len(unplaced)
    # only launches still unplaced, from threads that own no range (those that own ranges were placed on
    # them): a few, where the pass over every launch cost ~0.3 s at 10M
    owners = np.array(sorted(set(thread_r.ranges.tid.tolist())), dtype=np.int64)
    # (a sorted lookup, not np.isin: that calls np.unique, which imports numpy.ma, ~10 ms of every top)
    launcher = tid[unplaced]
    todo = unplaced[owners[np.minimum(np.searchsorted(owners, launcher), len(owners) - 1)] != launcher]
    if not len(todo):
        return out, len(unplaced)
    placed = out[todo]
    _contain(placed, launch[todo], proc[todo], thread_r.ranges.pid, thread_r)
    out[todo] = placed
    return out, len(unplaced) - int(np.count_nonzero(placed != NOT_IN_ITERATION))


def _subset(r: MarkerRanges, mask: np.ndarray) -> MarkerRanges:
    return MarkerRanges(r.ranges.take(mask), r.key[mask])


def _contain(out, t, kscope, rscope, r: MarkerRanges, depth: int = 8, chunk: int = 1 << 20) -> None:
    """Fill ``out`` where ``t`` falls in a range of the same scope. Sorted arrays, no Python loop
    over kernels: ranges are ordered by (scope, start) and each launch is located by searchsorted
    on a composite (scope, time) key. Ranges that never overlap within a scope (step markers, one
    after another) need that one search (:func:`_contain_disjoint`); others are checked up to ``depth``
    enclosing ranges back for nesting (:func:`_contain_nested`). Kernels go in chunks so temporaries
    stay small on 10M-launch captures."""
    scopes, r_code = np.unique(rscope, return_inverse=True)
    starts, ends = r.ranges.start, r.ranges.end
    t0 = min(int(starts.min()), int(t.min()) if len(t) else int(starts.min()))
    span = max(int(ends.max()), int(t.max()) if len(t) else 0) - t0 + 1
    comp_r = r_code.astype(np.int64) * span + (starts - t0)
    order = np.argsort(comp_r, kind="stable")
    comp_r = comp_r[order]
    comp_end = r_code[order].astype(np.int64) * span + (ends[order] - t0)
    bounds = None
    if (comp_end >= comp_r).all() and (comp_end[:-1] <= comp_r[1:]).all():  # no two ranges of a scope overlap
        # in order, the boundaries alternate start, end, start, end...: a launch inside a range has an odd
        # number of them at or before it, and the range is the label at that count
        bounds = np.empty(2 * len(comp_r), dtype=np.int64)
        bounds[0::2], bounds[1::2] = comp_r, comp_end
        label = np.full(len(bounds) + 1, NOT_IN_ITERATION, dtype=np.int64)
        label[1::2] = r.key[order]
    for lo in range(0, len(t), chunk):
        sl = slice(lo, lo + chunk)
        if bounds is not None:
            _contain_disjoint(out[sl], t[sl], kscope[sl], scopes, t0, span, bounds, label)
        else:
            _contain_nested(out[sl], t[sl], kscope[sl], scopes, r_code, t0, span, comp_r, order, r, depth)


def _contain_disjoint(oc, tc, sc, scopes, t0: int, span: int, bounds, label) -> None:
    """:func:`_contain` of one chunk when no two ranges of a scope overlap (``bounds``, ``label``: see there)."""
    if _contain_in_order(oc, tc, sc, scopes, t0, span, bounds, label):
        return
    if len(scopes) == 1:  # one thread (or process) holds every range: no scope to look up
        ok = sc == scopes[0]
        q = tc - t0
    else:
        pos = np.minimum(np.searchsorted(scopes, sc), len(scopes) - 1)
        ok = scopes[pos] == sc
        q = pos * span
        q += tc
        q -= t0
    ok &= tc >= 0
    ok &= oc == NOT_IN_ITERATION
    np.copyto(oc, label[np.searchsorted(bounds, q, side="right")], where=ok)


def _contain_in_order(oc, tc, sc, scopes, t0: int, span: int, bounds, label) -> bool:
    """:func:`_contain_disjoint` for launches in (scope, time) order (``nesting.cut_in_order``: a cut per range
    boundary, not a search per launch); False, with nothing done, for launches in another order."""
    return cut_in_order(oc, tc, sc, scopes, t0, span, bounds, label, where=oc == NOT_IN_ITERATION, from_time=0)


def _contain_nested(oc, tc, sc, scopes, r_code, t0: int, span: int, comp_r, order, r: MarkerRanges,
                    depth: int) -> None:
    """:func:`_contain` of one chunk for ranges that may nest or overlap: the innermost (latest-starting)
    range holding the launch among the ``depth`` latest starting at or before it."""
    starts, ends, keys = r.ranges.start, r.ranges.end, r.key
    pos = np.minimum(np.searchsorted(scopes, sc), len(scopes) - 1)
    idx = np.nonzero((scopes[pos] == sc) & (tc >= 0) & (oc == NOT_IN_ITERATION))[0]
    if not len(idx):
        return
    code = pos[idx]
    tk = tc[idx]
    last = np.searchsorted(comp_r, code.astype(np.int64) * span + (tk - t0), side="right") - 1
    # the launches still looking (compacted each pass: most are placed by the first)
    for back in range(depth):
        cand = last - back
        ok = cand >= 0
        if not ok.all():
            idx, code, tk, last, cand = idx[ok], code[ok], tk[ok], last[ok], cand[ok]
        if not len(idx):
            break
        ri = order[cand]
        same = r_code[ri] == code
        inside = same & (tk < ends[ri]) & (tk >= starts[ri])
        oc[idx[inside]] = keys[ri[inside]]
        more = same & ~inside  # not placed yet, and not walked past this scope's first range
        idx, code, tk, last = idx[more], code[more], tk[more], last[more]


def _by_kernel(profile: Profile, regex: re.Pattern, pattern: str, no_launch: int) -> Iterations:
    """A new iteration at each launch of a matching kernel, counted per GPU in GPU order."""
    k = profile.columns
    is_mark_cat = _matching(k.names, regex)
    if not is_mark_cat.any():
        raise WindowError(f"matches no kernel in {profile.source}", field="iteration_kernel", value=pattern)
    marks = is_mark_cat[k.name]
    order = np.lexsort((k.start, k.gpu))
    gpu_sorted = k.gpu[order]
    m_sorted = marks[order].astype(np.int64)
    csum = np.cumsum(m_sorted)
    # restart the running count at each GPU boundary
    first_of_gpu = np.r_[0, np.nonzero(np.diff(gpu_sorted))[0] + 1]
    base = np.zeros(len(order), dtype=np.int64)
    base[first_of_gpu] = csum[first_of_gpu] - m_sorted[first_of_gpu]
    base = np.maximum.accumulate(base)
    it_sorted = csum - base - 1
    it = np.empty(len(order), dtype=np.int64)
    it[order] = it_sorted
    it[it < 0] = NOT_IN_ITERATION
    keys = np.flatnonzero(np.bincount(it[it >= 0])).tolist()
    outside = int((it == NOT_IN_ITERATION).sum())
    return Iterations(it, keys, f"kernel {pattern}", AttributionMode.KERNEL, no_launch, outside,
                      MarkerRanges.empty())


def gpus_left_out(profile: Profile, its: Iterations, gpu: int | None = None,
                  presence: tuple[np.ndarray, np.ndarray] | None = None) -> dict[int, str]:
    """GPUs with kernels none of which falls in an iteration because their rank or process has no
    step marker (or, with --iteration-kernel, no such kernel) — {gpu: why}. A GPU whose process
    does have markers but launched nothing inside them is not listed: it did no step work. ``presence``:
    per GPU index, whether it has launches and launches in an iteration, when the caller counted them."""
    k = profile.columns
    if its.mode not in ("marker", "kernel") or not len(k):
        return {}
    gpus = k.gpu
    n = int(gpus.max()) + 1
    if presence is None:
        present = np.bincount(gpus, minlength=n) > 0
        in_step = np.bincount(gpus[its.kernel_iteration >= 0], minlength=n) > 0
    else:
        present, in_step = presence
    candidates = present & ~in_step
    if gpu is not None:
        candidates &= np.arange(n) == gpu
    if not candidates.any():
        return {}
    if its.mode == "kernel":
        return {int(g): f"no kernel matching the iteration kernel {its.marker[len('kernel '):]!r} ran on it"
                for g in np.nonzero(candidates)[0]}
    if k.launch_tid is None or k.launch_start is None:
        return {int(g): "none of its kernels has its launch call in the capture" for g in np.nonzero(candidates)[0]}
    tid = k.launch_tid
    launched = (tid >= 0) & (k.launch_start >= 0)
    owners = np.array(sorted(set(its.ranges.ranges.pid.tolist())), dtype=np.int64)
    from_owner = launched & np.isin(tid >> 24, owners)
    has_launch = np.bincount(gpus[launched], minlength=n) > 0
    has_owner = np.bincount(gpus[from_owner], minlength=n) > 0
    out: dict[int, str] = {}
    for g in np.nonzero(candidates & ~has_owner)[0]:
        out[int(g)] = (f"its process has no closed {its.marker} range" if has_launch[g]
                       else "none of its kernels has its launch call in the capture")
    return out

