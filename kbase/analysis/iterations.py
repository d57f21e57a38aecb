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
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kbase.enums import AttributionMode
from kbase.errors import WindowError
from kbase.readers.profile import Profile

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
class Iterations:
    """Result of attribution: one iteration key per kernel (-1: none) and the ranges used."""

    kernel_iteration: np.ndarray  # int64, aligned with profile.kernels rows
    keys: list[int]  # sorted distinct iteration keys seen in the profile
    marker: str  # human description: the regex or the auto-detected marker's name
    mode: AttributionMode
    no_launch: int  # kernels whose launch call is not in the capture (sliced export)
    outside: int  # kernels launched outside every iteration range
    ranges: pd.DataFrame  # the marker ranges with their key (empty in "kernel"/"none" mode)


def compile_regex(pattern: str, field: str) -> re.Pattern:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise WindowError(f"not a valid regular expression ({exc})", field=field, value=pattern) from None


def pick_marker(profile: Profile, marker: str | None) -> tuple[re.Pattern, str] | None:
    """The marker regex to use and how to name it; None when no marker is given or detected."""
    names = profile.ranges["name"]
    if marker is not None:
        regex = compile_regex(marker, "marker")
        if names.empty:
            raise WindowError(f"given but {profile.source} has no NVTX/annotation ranges", field="marker", value=marker)
        if not names.str.contains(regex).any():
            sample = ", ".join(repr(n) for n in names.value_counts().index[:5])
            raise WindowError(f"matches no range in {profile.source} (most common ranges: {sample})",
                              field="marker", value=marker)
        return regex, marker
    if names.empty:
        return None
    distinct = pd.Series(names.unique())
    for label, pattern in AUTO_MARKERS:
        regex = re.compile(pattern, re.IGNORECASE)
        hits = distinct[distinct.str.contains(regex)]
        if len(hits):
            return regex, label
    return None


def attribute(profile: Profile, marker: str | None = None, iteration_kernel: str | None = None) -> Iterations:
    k = profile.kernels
    no_launch = int((k["launch_start"] < 0).sum())
    if iteration_kernel is not None:
        return _by_kernel(profile, compile_regex(iteration_kernel, "iteration_kernel"), iteration_kernel, no_launch)
    picked = pick_marker(profile, marker)
    if picked is None:
        it = np.full(len(k), NOT_IN_ITERATION, dtype=np.int64)
        return Iterations(it, [], "", AttributionMode.NONE, no_launch, 0, profile.ranges.iloc[0:0])
    regex, label = picked
    r = profile.ranges[profile.ranges["name"].str.contains(regex)].copy()
    r = _key_ranges(r)
    # Step markers cover every thread of their process; other markers (ops) only their own thread.
    step_like = any(re.search(p, str(n), re.IGNORECASE) for n in r["name"].head(50) for _, p in AUTO_MARKERS)
    it = _project(profile, r, cross_thread=step_like)
    outside = int(((it == NOT_IN_ITERATION) & (k["launch_start"].to_numpy() >= 0)).sum())
    # Every closed marker range is an iteration, even one that launched nothing (a zero sample).
    keys = sorted(int(x) for x in r["key"].unique())
    return Iterations(it, keys, label, AttributionMode.MARKER, no_launch, outside, r)


def _key_ranges(r: pd.DataFrame) -> pd.DataFrame:
    """Give each marker range its iteration key; drop ranges that never closed (partial steps)."""
    r = r[r["end"] >= 0].sort_values(["pid", "start"], kind="stable")
    numbers = r["name"].str.extract(_NUMBER, expand=False)
    numbered = numbers.notna().all() and len(r) > 0
    if numbered:
        r["key"] = numbers.astype("int64")
        # Numbers are step ids only if unique within each process and shared across processes
        # (op ids like "aten::linear, op_id = 314300" are neither).
        numbered = not r.duplicated(["pid", "key"]).any() and _shared_across(r)
    if not numbered:
        r["key"] = r.groupby("pid").cumcount().astype("int64")
    return r.reset_index(drop=True)


def _shared_across(r: pd.DataFrame) -> bool:
    sets = [set(g) for _, g in r.groupby("pid")["key"]]
    if len(sets) < 2:
        return True
    common = set.intersection(*sets)
    return len(common) >= 0.5 * min(len(s) for s in sets)


def _project(profile: Profile, r: pd.DataFrame, cross_thread: bool) -> np.ndarray:
    """Key of the innermost range containing each kernel's launch, on its thread or process.

    With ``cross_thread`` (step markers), a launch from a thread that owns no marker range — the
    autograd backward thread, a data-parallel comm thread — belongs to the step range of its
    process that contains the launch time: a step spans the whole process's work.
    """
    k = profile.kernels
    n = len(k)
    out = np.full(n, NOT_IN_ITERATION, dtype=np.int64)
    if r.empty or n == 0:
        return out
    launch = k["launch_start"].to_numpy()
    tid = k["launch_tid"].to_numpy()
    proc = tid >> 24  # process key of the launching thread (-1 stays negative: no launch)
    thread_r = r[r["tid"] >= 0]
    proc_r = r[r["tid"] < 0]
    if len(thread_r):
        _contain(out, launch, tid, thread_r["tid"].to_numpy(), thread_r)
    if len(proc_r):
        _contain(out, launch, proc, proc_r["pid"].to_numpy(), proc_r)
    if cross_thread and len(thread_r):
        orphan = ~np.isin(tid, thread_r["tid"].unique())
        proc[~orphan] = -2  # threads that own ranges were attributed on their own ranges
        _contain(out, launch, proc, thread_r["pid"].to_numpy(), thread_r)
    return out


def _contain(out, t, kscope, rscope, r: pd.DataFrame, depth: int = 8, chunk: int = 1 << 20) -> None:
    """Fill ``out`` where ``t`` falls in a range of the same scope. Sorted arrays, no Python loop
    over kernels: ranges are ordered by (scope, start) and each launch is located by searchsorted
    on a composite (scope, time) key; up to ``depth`` enclosing ranges are checked for nesting.
    Kernels go in chunks so temporaries stay small on 10M-launch captures."""
    scopes, r_code = np.unique(rscope, return_inverse=True)
    starts = r["start"].to_numpy()
    ends = r["end"].to_numpy()
    keys = r["key"].to_numpy()
    t0 = int(starts.min())
    span = int(max(int(ends.max()), int(t.max()) if len(t) else 0) - min(t0, int(t.min()) if len(t) else t0) + 1)
    t0 = min(t0, int(t.min()) if len(t) else t0)
    comp_r = r_code.astype(np.int64) * span + (starts - t0)
    order = np.argsort(comp_r, kind="stable")
    comp_r = comp_r[order]
    for lo in range(0, len(t), chunk):
        sl = slice(lo, lo + chunk)
        tc, sc, oc = t[sl], kscope[sl], out[sl]
        pos = np.minimum(np.searchsorted(scopes, sc), len(scopes) - 1)
        idx = np.nonzero((scopes[pos] == sc) & (tc >= 0) & (oc == NOT_IN_ITERATION))[0]
        if not len(idx):
            continue
        code = pos[idx]
        tk = tc[idx]
        last = np.searchsorted(comp_r, code.astype(np.int64) * span + (tk - t0), side="right") - 1
        pending = np.ones(len(idx), dtype=bool)
        for back in range(depth):
            cand = last - back
            ok = pending & (cand >= 0)
            if not ok.any():
                break
            ri = order[np.maximum(cand, 0)]
            same = r_code[ri] == code
            inside = ok & same & (tk < ends[ri]) & (tk >= starts[ri])
            oc[idx[inside]] = keys[ri[inside]]
            pending &= ~inside
            pending &= same  # walked past this scope's first range: stop looking


def _by_kernel(profile: Profile, regex: re.Pattern, pattern: str, no_launch: int) -> Iterations:
    """A new iteration at each launch of a matching kernel, counted per GPU in GPU order."""
    k = profile.kernels
    cats = k["name"].cat.categories
    is_mark_cat = np.asarray(pd.Series(cats).str.contains(regex), dtype=bool)
    if not is_mark_cat.any():
        raise WindowError(f"matches no kernel in {profile.source}", field="iteration_kernel", value=pattern)
    marks = is_mark_cat[k["name"].cat.codes.to_numpy()]
    order = np.lexsort((k["start"].to_numpy(), k["gpu"].to_numpy()))
    gpu_sorted = k["gpu"].to_numpy()[order]
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
    keys = sorted(int(x) for x in np.unique(it[it >= 0]))
    outside = int((it == NOT_IN_ITERATION).sum())
    return Iterations(it, keys, f"kernel {pattern}", AttributionMode.KERNEL, no_launch, outside,
                      profile.ranges.iloc[0:0])


def gpus_left_out(profile: Profile, its: Iterations, gpu: int | None = None) -> dict[int, str]:
    """GPUs with kernels none of which falls in an iteration because their rank or process has no
    step marker (or, with --iteration-kernel, no such kernel) — {gpu: why}. A GPU whose process
    does have markers but launched nothing inside them is not listed: it did no step work."""
    k = profile.kernels
    if its.mode not in ("marker", "kernel") or not len(k):
        return {}
    gpus = k["gpu"].to_numpy()
    n = int(gpus.max()) + 1
    present = np.bincount(gpus, minlength=n) > 0
    in_step = np.bincount(gpus[its.kernel_iteration >= 0], minlength=n) > 0
    candidates = present & ~in_step
    if gpu is not None:
        candidates &= np.arange(n) == gpu
    if not candidates.any():
        return {}
    if its.mode == "kernel":
        return {int(g): f"no kernel matching the iteration kernel {its.marker[len('kernel '):]!r} ran on it"
                for g in np.nonzero(candidates)[0]}
    tid = k["launch_tid"].to_numpy()
    launched = (tid >= 0) & (k["launch_start"].to_numpy() >= 0)
    owners = np.unique(its.ranges["pid"].to_numpy())
    from_owner = launched & np.isin(tid >> 24, owners)
    has_launch = np.bincount(gpus[launched], minlength=n) > 0
    has_owner = np.bincount(gpus[from_owner], minlength=n) > 0
    out: dict[int, str] = {}
    for g in np.nonzero(candidates & ~has_owner)[0]:
        out[int(g)] = (f"its process has no closed {its.marker} range" if has_launch[g]
                       else "none of its kernels has its launch call in the capture")
    return out

