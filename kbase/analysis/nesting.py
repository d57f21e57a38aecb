"""The innermost range around each launch: ranges ``[start, end)`` in scopes (threads or processes) sorted once,
then asked for many launches at once (``analysis.ops``' op and scope attribution). Sorted-array searches over
composite (scope, time) keys and the ranges' nesting depth; no Python loop over launches or ranges."""

from __future__ import annotations

import numpy as np

from kbase.readers.profile import RangeColumns

_WALK_BACK = 16  # ranges looked back past when the ranges of a scope do not nest (overlapping NVTX ranges)


def cut_in_order(out: np.ndarray, t: np.ndarray, t_scope: np.ndarray, scopes: np.ndarray, t0: int, span: int,
                 bounds: np.ndarray, answer: np.ndarray, where: np.ndarray | None = None,
                 from_time: int | None = None) -> bool:
    """``out = answer[np.searchsorted(bounds, (scope's index) * span + t - t0, side="right")]`` for queries in
    (scope, time) order (a reader's order by thread and launch call), a query's scope looked up in ``scopes``,
    ``bounds`` of scope i lying in ``[i * span, (i + 1) * span)`` and ``answer[0]``, the answer of no scope, at
    each scope's even index: each scope's run of queries is cut where its boundaries fall (one search per
    boundary, not per query) and each piece takes its answer by one ``np.repeat``. Written where ``where`` holds
    (all, None) and not before ``from_time``; queries of no scope are left alone. False, with nothing written,
    for queries in another order (the caller searches then)."""
    if len(t_scope) > 1:
        if not (t_scope[1:] >= t_scope[:-1]).all():
            return False
        down = np.flatnonzero(t[1:] < t[:-1])  # time goes back: only where a new scope's run begins
        if len(down) and (t_scope[down] == t_scope[down + 1]).any():
            return False
    lo, hi = np.searchsorted(t_scope, scopes, side="left"), np.searchsorted(t_scope, scopes, side="right")
    edge = np.searchsorted(bounds, np.arange(len(scopes) + 1, dtype=np.int64) * span).tolist()
    for i, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        if from_time is not None and a < b:
            a += int(np.searchsorted(t[a:b], from_time))
        if a == b:
            continue
        run = t[a:b]
        # the number of the scope's boundaries at or before each query steps up where a boundary is passed
        cut = np.searchsorted(run, bounds[edge[i]:edge[i + 1]] - i * span + t0)
        values = np.repeat(answer[edge[i]:edge[i + 1] + 1], np.diff(cut, prepend=0, append=len(run)))
        if where is None:
            out[a:b] = values
        else:
            np.copyto(out[a:b], values, where=where[a:b])
    return True


class ThreadRanges:
    """Some ranges of a profile, ready to find the innermost one around launches: on the launching thread, else
    (process-wide NVTX start/end ranges) in its process. ``values``: what a range answers (one int per row of
    ``rows``; default: its row)."""

    def __init__(self, r: RangeColumns, rows: np.ndarray, values: np.ndarray | None = None) -> None:
        values = rows if values is None else values
        threaded = r.tid[rows] >= 0
        self.threads = Nesting(r.start[rows[threaded]], r.end[rows[threaded]], r.tid[rows[threaded]],
                               values[threaded])
        self.processes = Nesting(r.start[rows[~threaded]], r.end[rows[~threaded]], r.pid[rows[~threaded]],
                                 values[~threaded])

    def find(self, t: np.ndarray, tid: np.ndarray, wanted: np.ndarray | None = None) -> np.ndarray:
        """Per launch (time ``t`` on thread ``tid``; of ``wanted`` only when given): the value of the innermost
        range holding it, -1 where none."""
        out = self.threads.find(t, tid, wanted)
        if self.processes.m:
            todo = np.flatnonzero(out < 0 if wanted is None else (out < 0) & wanted)
            if len(todo):
                out[todo] = self.processes.find(t[todo], tid[todo] >> 24)
        return out


class Nesting:
    """Ranges ``[start, end)`` in scopes (threads or processes), sorted once, then asked for the innermost range
    of a query's scope holding its time (``find``).

    Ranges of one scope that nest (a thread's op calls, NVTX push/pop) form a tree: a range's depth is the
    number of ranges of its scope open at its start, a query's the number open at its time (two sorted-array
    counts), and its innermost range is the last one at depth (open - 1) starting at or before the time (one
    search over (depth, position) keys). Ranges that never overlap within a scope take one search over their
    alternating boundaries. Where ranges overlap without nesting the answer is checked and the query walks
    back over the ``_WALK_BACK`` latest-starting ranges instead."""

    def __init__(self, start: np.ndarray, end: np.ndarray, scope: np.ndarray, values: np.ndarray | None = None
                 ) -> None:
        m = self.m = len(start)
        self.values = values  # what each range answers (default: its index)
        self.dtype = np.int64 if values is None else values.dtype
        if not m:
            return
        self.scopes, code = np.unique(scope, return_inverse=True)
        code = code.astype(np.int64)
        self.order = np.lexsort((np.arange(m), -end, start, code))  # by scope, start, outer first
        self.s, self.e, self.c = start[self.order], end[self.order], code[self.order]
        self.t0 = int(self.s.min())
        self.span = int(self.e.max()) - self.t0 + 1
        self.ks = self.c * self.span + (self.s - self.t0)
        ke_in_order = self.c * self.span + (self.e - self.t0)
        self.disjoint = bool((ke_in_order[:-1] <= self.ks[1:]).all())  # NVTX phases, one range per call
        if self.disjoint:  # the boundaries alternate start, end: a time inside a range has an odd number before
            self.bounds = np.empty(2 * m, dtype=np.int64)
            self.bounds[0::2], self.bounds[1::2] = self.ks, ke_in_order
            # what a query answers by the count of boundaries at or before it: a range's value when odd
            self.answer = np.full(2 * m + 1, -1, dtype=self.dtype)
            self.answer[1::2] = self.order if values is None else values[self.order]
            return
        self.ke = np.sort(ke_in_order)
        starts = np.arange(len(self.scopes), dtype=np.int64) * self.span
        self.first, self.ended_before = np.searchsorted(self.ks, starts), np.searchsorted(self.ke, starts)
        pos = np.arange(m, dtype=np.int64)
        depth = (pos - self.first[self.c]) - (np.searchsorted(self.ke, self.ks, side="right")
                                              - self.ended_before[self.c])
        self.dkey = np.sort(depth * m + pos)

    def find(self, t: np.ndarray, t_scope: np.ndarray, wanted: np.ndarray | None = None) -> np.ndarray:
        """Per query (time ``t`` in scope ``t_scope``; of ``wanted`` only when given): the index of the innermost
        range of its scope holding it (its value, with ``values``), -1 where none."""
        if not self.m or not len(t):
            return np.full(len(t), -1, dtype=self.dtype)
        if self.disjoint:
            return self._find_disjoint(t, t_scope, wanted)
        out = self._find_nested(t, t_scope, wanted)
        if self.values is None:
            return out
        return np.where(out >= 0, self.values[np.maximum(out, 0)], -1).astype(self.dtype)

    def _find_disjoint(self, t: np.ndarray, t_scope: np.ndarray, wanted: np.ndarray | None) -> np.ndarray:
        """``find`` by one search over the boundaries, every query at once (no compaction: a capture's launches
        nearly all have a thread of the ranges and a time in their span)."""
        span, t0 = self.span, self.t0
        out = np.full(len(t), -1, dtype=self.dtype)
        if cut_in_order(out, t, t_scope, self.scopes, t0, span, self.bounds, self.answer, wanted):
            return out
        if len(self.scopes) == 1:
            ok = t_scope == self.scopes[0]
            q = t - t0
        else:
            pos = np.searchsorted(self.scopes, t_scope)
            np.minimum(pos, len(self.scopes) - 1, out=pos)
            ok = self.scopes[pos] == t_scope
            q = pos.astype(np.int64, copy=False) * span
            q += t
            q -= t0
        ok &= t >= t0
        ok &= t < t0 + span
        if wanted is not None:
            ok &= wanted
        np.copyto(out, self.answer[np.searchsorted(self.bounds, q, side="right")], where=ok)
        return out

    def _find_nested(self, t: np.ndarray, t_scope: np.ndarray, wanted: np.ndarray | None) -> np.ndarray:
        out = np.full(len(t), -1, dtype=np.int64)
        m, span, t0 = self.m, self.span, self.t0
        where = np.minimum(np.searchsorted(self.scopes, t_scope), len(self.scopes) - 1)
        ok = (self.scopes[where] == t_scope) & (t >= t0) & (t - t0 < span)
        q = np.flatnonzero(ok if wanted is None else ok & wanted)
        qc = where[q].astype(np.int64)
        qk = qc * span + (t[q] - t0)
        s, e, c = self.s, self.e, self.c
        after = np.searchsorted(self.ks, qk, side="right")  # ranges starting at or before t (this scope's and lower)
        open_now = (after - self.first[qc]) - (np.searchsorted(self.ke, qk, side="right") - self.ended_before[qc])
        inside = open_now > 0
        q, qc, after, want = q[inside], qc[inside], after[inside], open_now[inside] - 1
        at = np.searchsorted(self.dkey, want * m + after) - 1
        key = self.dkey[np.maximum(at, 0)]
        cand = np.where(at >= 0, key % m, 0)
        tq = t[q]
        good = (at >= 0) & (key // m == want) & (c[cand] == qc) & (s[cand] <= tq) & (tq < e[cand])
        out[q[good]] = self.order[cand[good]]
        # ranges that overlap without nesting: the latest-starting range holding t among the last few
        q, qc, last = q[~good], qc[~good], after[~good] - 1
        for _ in range(_WALK_BACK):
            if not len(q):
                break
            live = last >= 0
            q, qc, last = q[live], qc[live], last[live]
            same = c[last] == qc
            hit = same & (s[last] <= t[q]) & (t[q] < e[last])
            out[q[hit]] = self.order[last[hit]]
            more = same & ~hit
            q, qc, last = q[more], qc[more], last[more] - 1
        return out


def innermost(start: np.ndarray, end: np.ndarray, scope: np.ndarray, t: np.ndarray, t_scope: np.ndarray) -> np.ndarray:
    """``Nesting(start, end, scope).find(t, t_scope)``: the innermost range holding each query, -1 where none."""
    return Nesting(start, end, scope).find(t, t_scope)
