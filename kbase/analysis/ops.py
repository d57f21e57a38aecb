"""Op attribution: the framework op that launched each kernel.

A kernel's op is the innermost range enclosing the CUDA runtime call that launched it (matched by process and
correlation id, as the iteration attribution does), on the launching thread:

- PyTorch profiler (Kineto): the innermost ``cpu_op`` / ``Operator`` event (``aten::cudnn_convolution``,
  ``aten::mm``); its scope is the innermost module call around it (``python_function`` events named
  ``nn.Module: Qwen2MLP_3``, recorded ``with_modules``/``with_stack``: the class, ``Qwen2MLP``), or on the
  autograd thread the backward node running it (``autograd::engine::evaluate_function: MmBackward0``). The op
  key is ``scope/op`` (``Qwen2MLP/aten::mm``) where a scope is known, else the op.
- Nsight Systems: the innermost NVTX push/pop range of the launching thread (a process-wide start/end range
  where none), PyTorch ``emit_nvtx`` names normalised to the op (``aten::conv2d, seq = 12, op_id = 4, sizes =
  [...]`` -> ``aten::conv2d``) and pyprof's dict ranges to ``mod.op``, so one op is one key across
  iterations and captures.

Iteration markers (``ProfilerStep#N``, the window's marker) are never an op. A launch inside no op range, or
whose launch call is not in the capture, has none (code -1). ``bare`` is each key's op without its scope:
the unit an algorithm swap is judged on (``comparison.ops``).

Cost: sorted-array searches over the ranges' composite (scope, time) keys and their nesting depth, no
Python loop over launches or ranges (README "Op attribution" gives the figures).
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kbase.analysis.iterations import AUTO_MARKERS
from kbase.analysis.nesting import ThreadRanges
from kbase.analysis.op_pairs import OpPairs  # (its own module: a stored read needs only it)
from kbase.readers.profile import RANGE_ANNOTATION, RANGE_MODULE, RANGE_OP, Profile

if TYPE_CHECKING:
    from kbase.analysis.summary import LeaderboardSummary

NO_OP = -1
SCOPE_SEP = "/"
# what emit_nvtx appends to an op's name per call ("aten::mm, seq = 12, op_id = 40, sizes = [[8, 4], [4, 2]]")
_EMIT_NVTX_TAILS = ("seq = ", "stashed seq = ", "op_id = ", "sizes = ", "input_op_ids = ")
_PARTITION = operator.methodcaller("partition", ", ")
_PYPROF = re.compile(r"\{'mod': '([^']*)', 'op': '([^']*)'")
_MODULE_PREFIX = "nn.Module: "
_INSTANCE = re.compile(r"_\d+\Z")
_BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
_STEP = re.compile("|".join(f"(?:{p})" for _, p in AUTO_MARKERS), re.IGNORECASE)
_STEP_INITIALS = frozenset("PpSsIiTt")  # what a name must start with to match _STEP (a cheap test first)
_SCOPE_PREFIXES = (_MODULE_PREFIX, "autograd::engine::evaluate_function: ")
CHUNK = 1 << 20  # launches attributed at once


@dataclass
class OpColumns:
    """Each launch's op: ``code`` (int32 per launch of ``profile.columns``, -1 none or outside the mask) into
    ``names`` (the op keys, sorted); ``bare[i]``: key i's op without its scope."""

    code: np.ndarray
    names: np.ndarray  # object
    bare: np.ndarray  # object

    def __len__(self) -> int:
        return len(self.names)


def op_name(raw: str) -> str:
    """A range's name as an op key: ``emit_nvtx``'s per-call counters and shapes dropped, pyprof's dict
    ranges as ``mod.op``, surrounding space stripped."""
    if raw[:1] == "{":
        m = _PYPROF.match(raw)
        if m is not None:
            return f"{m.group(1)}.{m.group(2)}" if m.group(1) else m.group(2)
    head, _, tail = raw.partition(", ")  # an op's name holds no ", ": the tail starts at the first one
    return (head if tail.startswith(_EMIT_NVTX_TAILS) else raw).strip()


def scope_name(raw: str) -> str:
    """A scope range's name as a scope: the module class (``nn.Module: Linear_12`` -> ``Linear``) or the
    backward node (``autograd::engine::evaluate_function: MmBackward0`` -> ``MmBackward0``)."""
    if raw.startswith(_MODULE_PREFIX):
        return _INSTANCE.sub("", raw[len(_MODULE_PREFIX):]).strip()
    return raw[len(_BACKWARD_PREFIX):].strip() if raw.startswith(_BACKWARD_PREFIX) else raw.strip()


def attribute_ops(profile: Profile, mask: np.ndarray | None = None, marker: str | None = None) -> OpColumns | None:
    """The op of every launch of ``profile`` (only those of ``mask`` when given); None when no launch has one
    (no op ranges, or no launch call in the capture): the profile carries no op information. ``marker``: the
    window's iteration marker regex (its ranges are not ops)."""
    k, r = profile.columns, profile.range_columns
    if k.launch_start is None or k.launch_tid is None or not len(r) or not len(k):
        return None
    wanted = k.launch_start >= 0
    if mask is not None:
        wanted &= mask
    if not wanted.any():
        return None
    kind = r.kind if r.kind is not None else np.zeros(len(r), dtype=np.int8)
    closed = r.end > r.start
    op_kind = RANGE_OP if (kind == RANGE_OP).any() else RANGE_ANNOTATION  # NVTX: every range may be an op
    # emit_nvtx's per-call tail off every name in one pass (its names are distinct per call: one per launch), then
    # each distinct name is looked at once (ranges run to a million; ops to a few thousand)
    names = r.name.tolist()
    heads = [h if sep and tail.startswith(_EMIT_NVTX_TAILS) else n
             for n, (h, sep, tail) in zip(names, map(_PARTITION, names))]
    lookup = {n: i for i, n in enumerate(dict.fromkeys(heads))}
    name_idx = np.fromiter(map(lookup.__getitem__, heads), dtype=np.int64, count=len(r))
    del names, heads
    user = re.compile(marker) if marker else None
    op_texts: dict[str, int] = {}
    scope_texts: dict[str, int] = {}
    op_of, scope_of = np.full(len(lookup), -1, np.int64), np.full(len(lookup), -1, np.int64)
    backward_of = np.zeros(len(lookup), dtype=bool)
    for i, n in enumerate(lookup):
        key = op_name(n)
        if key and not (n[:1] in _STEP_INITIALS and _STEP.match(n)) and (user is None or not user.search(n)):
            op_of[i] = op_texts.setdefault(key, len(op_texts))
        if n.startswith(_SCOPE_PREFIXES):
            backward_of[i] = n.startswith(_BACKWARD_PREFIX)
            text = scope_name(n)
            if text:
                scope_of[i] = scope_texts.setdefault(text, len(scope_texts))
    op_rows = np.flatnonzero(closed & (kind == op_kind) & (op_of[name_idx] >= 0))
    if not len(op_rows):
        return None
    scoped = [np.flatnonzero(x & (scope_of[name_idx] >= 0))  # modules last: they win where both hold a launch
              for x in (closed & (kind == RANGE_OP) & backward_of[name_idx], closed & (kind == RANGE_MODULE))]
    # each search answers a value per launch: the op of the innermost op range, then the scope of the innermost
    # scope range (-1: none)
    searches = [ThreadRanges(r, rows, values[name_idx[rows]])
                for rows, values in ((op_rows, op_of), *((x, scope_of) for x in scoped)) if len(rows)]
    n_op = len(op_texts)
    bound = (len(scope_texts) + 1) * n_op
    pair_of: np.ndarray = np.full(len(k), -1, dtype=np.int32 if bound < 1 << 31 else np.int64)
    for lo in range(0, len(k), CHUNK):  # in chunks: no launch-long temporaries at a 10M-launch snapshot's peak
        sl = slice(lo, lo + CHUNK)
        t, tid = k.launch_start[sl], k.launch_tid[sl]
        pair = searches[0].find(t, tid, wanted[sl])  # (scope + 1) * n_op + op: no scope until a scope range holds it
        if len(searches) > 1:
            has = np.flatnonzero(pair >= 0)
            got_pair = pair[has].astype(pair_of.dtype)
            for search in searches[1:]:
                got = search.find(t[has], tid[has])
                got_pair = np.where(got >= 0, (got + 1) * n_op + got_pair % n_op, got_pair)
            pair[has] = got_pair
        pair_of[sl] = pair
    present = _present(pair_of, bound)
    if not len(present):
        return None
    op_list, scope_list = list(op_texts), list(scope_texts)
    keys = [op_list[p % len(op_texts)] if p < len(op_texts) else
            f"{scope_list[p // len(op_texts) - 1]}{SCOPE_SEP}{op_list[p % len(op_texts)]}" for p in present.tolist()]
    by_name = np.argsort(np.array(keys, dtype=object), kind="stable")
    rank = np.empty(len(keys), dtype=np.int32)
    rank[by_name] = np.arange(len(keys), dtype=np.int32)
    bare = [op_list[p % len(op_texts)] for p in present.tolist()]
    return OpColumns(code=_coded(pair_of, present, rank, bound), names=np.array(keys, dtype=object)[by_name],
                     bare=np.array(bare, dtype=object)[by_name])


def _small(bound: int, n: int) -> bool:
    """Whether a table over ``bound`` pair codes beats sorting ``n`` launches' codes."""
    return bound <= 1 << 24 and bound <= 16 * n + 1024


def _present(pair_of: np.ndarray, bound: int) -> np.ndarray:
    """The pair codes (under ``bound``) that launches have (-1: none), ascending."""
    if not _small(bound, len(pair_of)):
        return np.unique(pair_of[pair_of >= 0])
    seen = np.zeros(bound + 1, dtype=bool)
    for lo in range(0, len(pair_of), CHUNK):
        seen[pair_of[lo : lo + CHUNK] + 1] = True  # (-1: slot 0)
    return np.flatnonzero(seen[1:])


def _coded(pair_of: np.ndarray, present: np.ndarray, rank: np.ndarray, bound: int) -> np.ndarray:
    """Each launch's op code: ``rank`` of its pair among ``present`` (NO_OP for none), a chunk at a time."""
    code = np.empty(len(pair_of), dtype=np.int32)
    small = _small(bound, len(pair_of))
    if small:
        table = np.full(bound + 1, NO_OP, dtype=np.int32)
        table[present + 1] = rank
    for lo in range(0, len(pair_of), CHUNK):
        chunk = pair_of[lo : lo + CHUNK]
        if small:
            code[lo : lo + CHUNK] = table[chunk + 1]
        else:
            pos = np.minimum(np.searchsorted(present, chunk), len(present) - 1)
            code[lo : lo + CHUNK] = np.where(chunk >= 0, rank[pos], NO_OP)
    return code


def op_pairs(ops: OpColumns, codes: np.ndarray, op_code: np.ndarray, dur: np.ndarray, iteration: np.ndarray,
             keys: list[int], kernel_names: np.ndarray) -> OpPairs:
    """The (op, kernel) pairs of a window's launches (``codes``: kernel name codes, ``op_code``: their op codes,
    ``dur``, ``iteration``: their iteration key, ``keys``: the window's iterations) by bincounts over a
    composite (op, kernel) key, and their time per iteration by the composite (pair, iteration) keys that
    occur: memory in proportion to the launches, whatever the ops x kernels x iterations space."""
    from kbase.analysis.sparse import SparseRows, column_lookup

    n_names = len(kernel_names)
    karr = np.asarray(keys, dtype=np.int64)
    n_keys = len(karr)
    chunks = [slice(lo, lo + CHUNK) for lo in range(0, len(codes), CHUNK)]

    def pairs_of(sl: slice) -> np.ndarray:
        return (op_code[sl].astype(np.int64) + 1) * n_names + codes[sl]

    # the (op, kernel) pairs present, then bincounts over them a chunk of launches at a time (no launch-long
    # temporaries, no table over every op x kernel x iteration)
    bound = (len(ops.names) + 1) * n_names
    if bound <= 4 * len(codes) + (1 << 16):  # a table over the pair space no larger than the launches: no sort
        seen = np.zeros(bound, dtype=bool)
        for sl in chunks:
            seen[pairs_of(sl)] = True
        present = np.flatnonzero(seen)
        rank = np.zeros(bound, dtype=np.int64)
        rank[present] = np.arange(len(present))
    else:
        present = np.unique(np.concatenate([np.unique(pairs_of(sl)) for sl in chunks] or [np.empty(0, np.int64)]))
        rank = None

    def index_of(p: np.ndarray) -> np.ndarray:  # a lookup where the table is small, else a search
        return rank[p] if rank is not None else np.searchsorted(present, p)
    column_of = column_lookup(karr)
    count, total = np.zeros(len(present), dtype=np.int64), np.zeros(len(present))
    parts = []
    for sl in chunks:
        idx = index_of(pairs_of(sl))
        count += np.bincount(idx, minlength=len(present))
        total += np.bincount(idx, weights=dur[sl], minlength=len(present))
        if n_keys:
            inside = iteration[sl] >= 0
            key = idx[inside] * n_keys + column_of(iteration[sl][inside])  # (pair, iteration) as one key
            parts.append(SparseRows.from_keys(key, dur[sl][inside], (len(present), n_keys)))
    iter_ns = SparseRows.concat(parts) if parts else SparseRows.empty(len(present), n_keys)
    return OpPairs(names=ops.names, bare=ops.bare, op=(present // n_names - 1).astype(np.int32),
                   kernel=kernel_names[present % n_names], count=count, total_ns=total, iter_ns=iter_ns)


def op_board(pairs: OpPairs, summary: LeaderboardSummary, short_names: dict[str, str]) -> list[dict[str, Any]]:
    """The leaderboard grouped by op: per op key (None: kernels launched by no op) its launches, total, average
    per launch, time and launches per iteration per GPU, shares of the window's GPU time and of kernel time, and
    its kernels (``kernel_rows``: the same figures per kernel, with its share of the op's time); largest total
    first. ``short_names``: full kernel name -> short name."""
    n_it, gpus = summary.iterations, max(int(summary.gpus), 1)
    per_iter = n_it * gpus if n_it and summary.aligned else 0

    def figures(count: float, total: float) -> dict[str, Any]:
        return {"count": int(count), "total_ns": int(round(total)), "avg_ns": total / count if count else math.nan,
                "per_iter_ns": total / per_iter if per_iter else math.nan,
                "count_per_iter": count / per_iter if per_iter else math.nan,
                "share_window": total / summary.window_gpu_ns if summary.window_gpu_ns else math.nan,
                "share_kernel": total / summary.total_kernel_ns if summary.total_kernel_ns else math.nan}

    names = pairs.names.tolist()
    by_op: dict[int, list[int]] = {}
    for i, op in enumerate(pairs.op.tolist()):
        by_op.setdefault(op, []).append(i)
    out = []
    for op, members in by_op.items():
        count, total = float(pairs.count[members].sum()), float(pairs.total_ns[members].sum())
        kernels = []
        for i in sorted(members, key=lambda j: (-pairs.total_ns[j], pairs.kernel[j])):
            name = str(pairs.kernel[i])
            row = {"name": name, "short_name": short_names.get(name, name),
                   **figures(float(pairs.count[i]), float(pairs.total_ns[i]))}
            row["share_op"] = float(pairs.total_ns[i]) / total if total else math.nan
            kernels.append(row)
        out.append({"op": names[op] if op >= 0 else None, "bare": str(pairs.bare[op]) if op >= 0 else None,
                    "kernels": len(kernels), **figures(count, total), "kernel_rows": kernels})
    out.sort(key=lambda r: (-r["total_ns"], r["op"] is None, r["op"] or ""))
    return out
