"""The diff by op, and algorithm swaps judged by op.

cuDNN/cuBLAS pick kernels per call: between two processes an op's work moves between kernels — launch counts
change, kernels (helpers included: scale, transpose, layout, split-K reduce) appear and vanish, or a kernel
serves other layers at an unchanged launch count (a reassignment). None of that is a regression of a kernel:
the op did the same work. So, where both sides know each kernel's op (``analysis.ops``):

- an op is **reshuffled** when work moved between its kernels: two or more of them changed, by their launch
  counts (a kernel appearing or vanishing included) or, at unchanged counts, significantly per launch, with
  a count change among them or one kernel significantly slower and another significantly faster (work
  reassigned between them). One kernel changing alone is that kernel's change, judged as such;
- a reshuffled op is judged as one unit: its time per iteration against its own noise (per-iteration samples,
  history or repeat captures, as a kernel's), with the same floors and ``min_effect_pct``; its kernels are
  not gated one by one (``swap``), unless a kernel's change outside the reshuffled ops is itself significant;
- the op is judged by its op name, scopes merged (``bare``): work moves between layers of one op.

Ops are compared in the kernels' unit (per iteration, per run or per window-second: ``comparison.work``), so
wherever both sides know their ops; kernels launched by no op keep the library-swap rule
(``swaps.mark_algorithm_swaps``). Pure numeric code: the sentences are the renderer's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kbase.analysis.sparse import BLOCK_CELLS
from kbase.comparison.noise import (
    RunNoise,
    decide,
    iteration_estimates,
    p_values,
    pick_noise,
    pooled_between,
    repeat_components,
)
from kbase.enums import KernelClass

if TYPE_CHECKING:
    from kbase.comparison.history import HistoryNoise
    from kbase.comparison.side import OpSide, Side
    from kbase.policy import Policy

OP_COLUMNS = ["class", "op", "bare", "reshuffled", "swap", "gated", "ignored", "before", "after", "delta_ns",
              "delta_pct", "count_before", "count_after", "share_before", "share_after", "effect", "z", "p_value",
              "noise_source", "noise_rel", "mde_rel", "mde_ns", "kernels", "kernels_changed"]
PAIR_COLUMNS = ["op", "kernel", "before", "after", "delta_ns", "count_before", "count_after"]
COUNT_MOVED = 0.5  # launches per iteration (and 1%) that make a launch-count change


@dataclass
class OpDiff:
    """Per op key (``table``: OP_COLUMNS, largest |effect| first) and per (op, kernel) pair (``pairs``:
    PAIR_COLUMNS; op None: launched by no op); ``groups``: the ops judged as units (bare names) that were
    reshuffled, with their verdict, for the notes."""

    table: dict[str, np.ndarray]
    pairs: dict[str, np.ndarray]
    groups: list[dict] = field(default_factory=list)
    _pairs_by_op: dict[str | None, list[dict]] | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return len(self.table["op"])

    def records(self) -> list[dict]:
        cols = [self.table[c].tolist() for c in OP_COLUMNS]
        return [dict(zip(OP_COLUMNS, values)) for values in zip(*cols)]

    def kernels_of(self, op: str | None) -> list[dict]:
        """The pairs of one op key (None: of no op), largest |Δ| first."""
        return self._by_op().get(op, [])

    def _by_op(self) -> dict[str | None, list[dict]]:
        # indexed once: a view asks for every op's kernels (20,000 kernels x 4,000 ops were a scan per op)
        if self._pairs_by_op is None:
            index: dict[str | None, list[dict]] = {}
            for v in zip(*(self.pairs[c].tolist() for c in PAIR_COLUMNS)):
                row = dict(zip(PAIR_COLUMNS, v))
                index.setdefault(row["op"], []).append(row)
            for rows in index.values():
                rows.sort(key=lambda r: -abs(r["delta_ns"]))
            self._pairs_by_op = index
        return self._pairs_by_op


def _union(b: np.ndarray, a: np.ndarray) -> np.ndarray:
    return np.array(sorted(set(b.tolist()) | set(a.tolist())), dtype=object)


def _at(keys: np.ndarray, values: np.ndarray, index: dict) -> np.ndarray:
    """``values`` (per entry of a side) placed on ``keys``' rows; 0 where the side lacks the key."""
    out = np.zeros((len(keys),) + values.shape[1:])
    rows = [index.get(k, -1) for k in keys.tolist()]
    have = np.array([r >= 0 for r in rows], dtype=bool)
    if have.any():
        out[have] = values[np.array([r for r in rows if r >= 0])]
    return out


def op_diff(before: Side, after: Side, rows: dict[str, np.ndarray], policy: Policy, z_crit: float,
            history: HistoryNoise | None = None) -> OpDiff | None:
    """The diff by op and the reshuffled ops' verdicts; marks the kernel rows they cover (``swap``, ``gated``
    in ``rows``). None unless both sides know their kernels' ops. ``z_crit``: the kernels' two-sided normal
    threshold (the ops are tested at it too)."""
    bo, ao = before.ops, after.ops
    if bo is None or ao is None or before.unit != after.unit:
        return None
    keys = _union(bo.keys, ao.keys)
    bare_of = dict(zip(bo.keys.tolist(), bo.bare.tolist())) | dict(zip(ao.keys.tolist(), ao.bare.tolist()))
    # a kernel the diff matched by family (another name on the after side) is one kernel here too
    renamed = {b: a for b, a, m in zip(rows["name_before"].tolist(), rows["name"].tolist(), rows["match"].tolist())
               if m == "family" and isinstance(b, str) and b != a}
    pairs = _pairs(bo, ao, renamed)
    # the judged units: ops by bare name (work moves between the scopes of one op)
    groups = np.array(sorted(set(bare_of.values())), dtype=object)
    group_of_pair = np.array([bare_of.get(o) if o is not None else None for o in pairs["op"].tolist()], dtype=object)
    reshuffled, changed_kernels = _reshuffled(groups, pairs, group_of_pair, rows)
    # a swapped op's time carries the between-process noise of its kernels' re-picking: its own fallback
    run_of = {g: policy.swap_run_noise if reshuffled[g] else policy.run_noise for g in groups.tolist()}
    wall = before.unit_wall_ns
    hist_df = history.df if history is not None else 0.0
    table = _unit_table(keys, bo, ao, before, after, policy, z_crit, wall, history.ops if history else {}, hist_df,
                        [run_of[bare_of[k]] for k in keys.tolist()])
    table["bare"] = np.array([bare_of[k] for k in keys.tolist()], dtype=object)
    if all(k == bare_of[k] for k in keys.tolist()):
        gt = table
    else:
        gt = _unit_table(groups, _grouped(bo), _grouped(ao), before, after, policy, z_crit, wall,
                         history.op_groups if history else {}, hist_df, [run_of[g] for g in groups.tolist()])
    gi = {g: i for i, g in enumerate(gt["op"].tolist())}
    ignored = policy.ignored_mask(gt["op"].tolist())
    gated_group = {g: reshuffled[g] and gt["class"][gi[g]] == KernelClass.REGRESSED.value and not ignored[gi[g]]
                   for g in groups.tolist()}
    table["reshuffled"] = np.array([reshuffled[b] for b in table["bare"].tolist()], dtype=bool)
    table["gated"] = np.array([gated_group[b] for b in table["bare"].tolist()], dtype=bool)
    table["swap"] = table["reshuffled"] & np.array([not _significant(gt, gi[b]) for b in table["bare"].tolist()])
    table["ignored"] = policy.ignored_mask(keys.tolist())
    table["kernels_changed"] = np.array([len(changed_kernels[b]) for b in table["bare"].tolist()], dtype=np.int64)
    _cover_kernels(rows, pairs, group_of_pair, {g for g, r in reshuffled.items() if r})
    order = np.lexsort((keys, -np.nan_to_num(np.abs(table["effect"]), nan=0.0), ~table["gated"]))
    summary = [{"op": g, "class": gt["class"][gi[g]], "delta_pct": float(gt["delta_pct"][gi[g]]),
                "effect": float(gt["effect"][gi[g]]), "mde_rel": float(gt["mde_rel"][gi[g]]),
                "gated": gated_group[g], "kernels": changed_kernels[g], "ignored": bool(ignored[gi[g]])}
               for g in groups.tolist() if reshuffled[g]]
    summary.sort(key=lambda x: -abs(x["effect"]) if x["effect"] == x["effect"] else 0.0)
    return OpDiff(table={c: table[c][order] for c in OP_COLUMNS}, pairs=pairs, groups=summary)


def _reshuffled(groups: np.ndarray, pairs: dict[str, np.ndarray], group_of_pair: np.ndarray,
                rows: dict[str, np.ndarray]) -> tuple[dict[str, bool], dict[str, list[str]]]:
    """Per op (bare): whether work moved between its kernels, and the kernels that changed."""
    moved = _count_moved(pairs["count_before"], pairs["count_after"])
    kernel_row = {n: i for i, n in enumerate(rows["name"].tolist())}
    home = _home_groups(pairs, group_of_pair)
    members: dict[object, list[int]] = {}  # each op's pairs, indexed once (not a scan of every pair per op)
    for j, g in enumerate(group_of_pair.tolist()):
        members.setdefault(g, []).append(j)
    kernels, moved_list = pairs["kernel"].tolist(), moved.tolist()
    reshuffled, changed_kernels = {}, {}
    for g in groups.tolist():
        at = members.get(g, [])
        changed = {kernels[j] for j in at if moved_list[j]}
        any_moved = bool(changed)
        up = down = False
        for k in {kernels[j] for j in at if not moved_list[j]}:
            i = kernel_row.get(k)
            if i is None or home.get(k) != g or not np.isfinite(rows["z"][i]):
                continue
            if abs(rows["z"][i]) >= rows["t_crit"][i]:
                up |= rows["z"][i] > 0
                down |= rows["z"][i] < 0
                changed.add(k)
        # an exchange between kernels: two or more changed, with a launch-count change or work moving both ways
        reshuffled[g] = len(changed) >= 2 and (any_moved or (up and down))
        changed_kernels[g] = sorted(changed)
    return reshuffled, changed_kernels


def _significant(t: dict[str, np.ndarray], i: int) -> bool:
    return t["class"][i] in (KernelClass.REGRESSED.value, KernelClass.REGRESSED_BELOW_FLOOR.value,
                             KernelClass.IMPROVED.value)


def _count_moved(cb: np.ndarray, ca: np.ndarray) -> np.ndarray:
    """Pairs whose launches per iteration changed (or that appeared or vanished)."""
    d = np.abs(ca - cb)
    return ((cb > 0) != (ca > 0)) | ((d >= COUNT_MOVED) & (d >= 0.01 * np.fmax(cb, ca)))


def _home_groups(pairs: dict[str, np.ndarray], group_of_pair: np.ndarray) -> dict[str, str]:
    """Each kernel's op (bare) holding most of its time on either side, where that is more than half of it."""
    weight = np.fmax(pairs["before"], pairs["after"])
    best: dict[str, tuple[float, object]] = {}
    total: dict[str, float] = {}
    for k, g, w in zip(pairs["kernel"].tolist(), group_of_pair.tolist(), weight.tolist()):
        total[k] = total.get(k, 0.0) + w
        if g is not None and w > best.get(k, (-1.0, None))[0]:
            best[k] = (w, g)
    return {k: str(g) for k, (w, g) in best.items() if total[k] > 0 and w > 0.5 * total[k]}


def _cover_kernels(rows: dict[str, np.ndarray], pairs: dict[str, np.ndarray], group_of_pair: np.ndarray,
                   reshuffled: set[str]) -> None:
    """Kernels whose change lies in reshuffled ops are one swap: not gated one by one. A kernel that also
    serves other ops keeps its own verdict when its change outside the reshuffled ops is significant on its own
    (a regression next to a swap is not hidden by it)."""
    if not reshuffled:
        return
    inside = np.array([g in reshuffled for g in group_of_pair.tolist()], dtype=bool)
    names = rows["name"].tolist()
    where = {n: i for i, n in enumerate(names)}
    touched = np.zeros(len(names), dtype=bool)
    moved_in = np.zeros(len(names))
    for k, d in zip(pairs["kernel"][inside].tolist(), pairs["delta_ns"][inside].tolist()):
        i = where.get(k)
        if i is not None:
            touched[i] = True
            moved_in[i] += d
    residual = rows["delta_ns"] - moved_in
    with np.errstate(divide="ignore", invalid="ignore"):
        z_rest = residual / (rows["noise_rel"] * rows["before"])
    # untested kernels (new, gone) keep their own verdict when most of their change is outside the swapped ops
    own = np.where(np.isfinite(z_rest), np.abs(z_rest) >= rows["t_crit"],
                   np.abs(residual) > 0.5 * np.abs(rows["delta_ns"]))
    own &= np.abs(residual) > 0
    covered = touched & ~own
    rows["swap"][covered] = True
    rows["gated"][covered] = False


def _pairs(bo: OpSide, ao: OpSide, renamed: dict[str, str]) -> dict[str, np.ndarray]:
    """The (op, kernel) pairs of both sides (the before side's kernels under their matched after-side names)."""
    before = [(op, renamed.get(k, k)) for op, k in zip(bo.pair_op.tolist(), bo.pair_kernel.tolist())]
    keys = list(dict.fromkeys(before + list(zip(ao.pair_op.tolist(), ao.pair_kernel.tolist()))))
    bi = {k: i for i, k in enumerate(before)}
    ai = {k: i for i, k in enumerate(zip(ao.pair_op.tolist(), ao.pair_kernel.tolist()))}
    index = np.empty(len(keys), dtype=object)
    index[:] = keys
    b_ns, a_ns = _at(index, bo.pair_ns, bi), _at(index, ao.pair_ns, ai)
    op = np.empty(len(keys), dtype=object)
    kernel = np.empty(len(keys), dtype=object)
    op[:], kernel[:] = [k[0] for k in keys], [k[1] for k in keys]
    return {"op": op, "kernel": kernel, "before": b_ns, "after": a_ns, "delta_ns": a_ns - b_ns,
            "count_before": _at(index, bo.pair_count, bi), "count_after": _at(index, ao.pair_count, ai)}


def _grouped(o: OpSide) -> OpSide:
    """``o`` with its op keys merged by bare name (the scopes of one op summed)."""
    from kbase.comparison.side import OpSide

    groups = sorted(set(o.bare.tolist()))
    gi = {g: i for i, g in enumerate(groups)}
    code = np.array([gi[b] for b in o.bare.tolist()], dtype=np.intp)

    def summed(x: np.ndarray) -> np.ndarray:
        out = np.zeros((len(groups),) + x.shape[1:])
        np.add.at(out, code, x)
        return out

    arr = np.array(groups, dtype=object)
    return OpSide(keys=arr, bare=arr, pair_op=o.pair_op, pair_kernel=o.pair_kernel, pair_ns=o.pair_ns,
                  pair_count=o.pair_count, op_ns=summed(o.op_ns), op_count=summed(o.op_count),
                  samples=o.samples.grouped(code, len(groups)), levels=summed(o.levels))


def _unit_table(keys: np.ndarray, bo: OpSide, ao: OpSide, before: Side, after: Side, policy: Policy, z_crit: float,
                wall: float, hist: dict[str, float], hist_df: float, run_noise: list[float]) -> dict[str, np.ndarray]:
    """Per op (``keys``): its time per iteration per GPU on each side, the change, and its test against its own
    noise — per-iteration samples within a capture, between-process noise from history (``hist``: relative sd
    per key), else from repeat captures, else the assumed ``run_noise`` (per key) — with the policy's floors."""
    n = len(keys)
    bi, ai = {k: i for i, k in enumerate(bo.keys.tolist())}, {k: i for i, k in enumerate(ao.keys.tolist())}
    b_ns, a_ns = _at(keys, bo.op_ns, bi), _at(keys, ao.op_ns, ai)
    has_b, has_a = np.array([k in bi for k in keys.tolist()]), np.array([k in ai for k in keys.tolist()])
    caps = (bo.levels.shape[1], ao.levels.shape[1])
    within, between, between_df = _sample_noise(keys, bo, ao, bi, ai, before, after)
    out: dict[str, np.ndarray] = {c: np.full(n, np.nan) for c in ("z", "p_value", "noise_rel", "mde_rel", "mde_ns")}
    source = np.full(n, None, dtype=object)
    cls = np.full(n, KernelClass.WITHIN_NOISE.value, dtype=object)
    p_at: list[int] = []
    p_df: list[float] = []
    for i, key in enumerate(keys.tolist()):
        if not (has_b[i] and has_a[i]):
            cls[i] = KernelClass.NEW.value if has_a[i] else KernelClass.GONE.value
            continue
        h = hist.get(key, np.nan)
        run = (RunNoise("history", float(h), hist_df) if np.isfinite(h) else
               RunNoise("repeat", float(between[i]), float(between_df[i]), True) if np.isfinite(between[i]) else None)
        rel_means = a_ns[i] / b_ns[i] - 1.0 if b_ns[i] else np.nan
        est = pick_noise(float(rel_means), [within[i]], run, caps, run_noise[i])
        d = decide(est, before_ns=float(b_ns[i]), after_ns=float(a_ns[i]), wall_ns=wall, z_crit=z_crit,
                   abs_floor_ns=policy.abs_floor_us * 1e3, share_floor=policy.share_floor,
                   rel_floor=policy.max_increase_pct / 100, min_effect=policy.min_effect_pct / 100, with_p=False)
        for c in out:
            out[c][i] = getattr(d, c)
        if d.test != "none":  # its p-value: below, every op's at once
            p_at.append(i)
            p_df.append(est.df)
        source[i] = d.source
        pct = (a_ns[i] - b_ns[i]) / b_ns[i] * 100 if b_ns[i] else np.inf
        cls[i] = (KernelClass.REGRESSED.value if d.regressed else KernelClass.REGRESSED_BELOW_FLOOR.value
                  if d.below_floor else KernelClass.IMPROVED.value if d.improved else
                  KernelClass.UNCHANGED.value if abs(pct) < policy.unchanged_pct else KernelClass.WITHIN_NOISE.value)
    if p_at:
        out["p_value"][p_at] = p_values(out["z"][p_at], np.array(p_df))
    delta = a_ns - b_ns
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(b_ns != 0, delta / b_ns * 100, np.inf)
        share_b = b_ns / wall if wall == wall and wall else np.full(n, np.nan)
        share_a = a_ns / after.unit_wall_ns if after.unit_wall_ns == after.unit_wall_ns and after.unit_wall_ns \
            else np.full(n, np.nan)
    served: dict[str, set[str]] = {}
    for o in (bo, ao):
        for op, kernel in zip(o.pair_op.tolist(), o.pair_kernel.tolist()):
            served.setdefault(op, set()).add(kernel)
    kernels = np.array([len(served.get(k, ())) for k in keys.tolist()], dtype=np.int64)
    return {"class": cls, "op": keys, "before": b_ns, "after": a_ns, "delta_ns": delta, "delta_pct": pct,
            "count_before": _at(keys, bo.op_count, bi), "count_after": _at(keys, ao.op_count, ai),
            "share_before": share_b, "share_after": share_a,
            "effect": delta / wall if wall == wall and wall else np.full(n, np.nan), "noise_source": source,
            "kernels": kernels, **out}


def _sample_noise(keys: np.ndarray, bo: OpSide, ao: OpSide, bi: dict, ai: dict, before: Side,
                  after: Side) -> tuple[list, np.ndarray, np.ndarray]:
    """Per op key: the within-capture estimate from both sides' per-iteration samples and the between-process
    sd (and its degrees of freedom) from repeat captures. The samples are sparse; the statistics, which count
    every iteration (an op's zeros too), read them a bounded block of keys at a time."""
    n = len(keys)
    bs = bo.samples.take(np.array([bi.get(k, -1) for k in keys.tolist()], dtype=np.int64))
    as_ = ao.samples.take(np.array([ai.get(k, -1) for k in keys.tolist()], dtype=np.int64))
    repeats = [side.sample_capture if side.pools_captures else None for side in (before, after)]
    within: list = []
    sds: list[list[np.ndarray]] = [[], []]
    dfs = [0.0, 0.0]
    step = max(1, BLOCK_CELLS // max(bs.shape[1] + as_.shape[1], 1))
    for lo in range(0, n, step):
        hi = min(lo + step, n)
        b, a = bs.block(lo, hi), as_.block(lo, hi)
        within += iteration_estimates(b, a) if b.shape[1] and a.shape[1] else [None] * (hi - lo)
        for j, (m, capture) in enumerate(((b, repeats[0]), (a, repeats[1]))):
            if capture is not None:
                sd, dfs[j] = repeat_components(m, capture)
                sds[j].append(sd)
    parts = [(np.concatenate(sds[j]) if sds[j] else np.empty(0), dfs[j]) for j in (0, 1) if repeats[j] is not None]
    between, between_df = pooled_between(parts) if parts and n else (np.full(n, np.nan), np.zeros(n))
    return within, between, between_df
