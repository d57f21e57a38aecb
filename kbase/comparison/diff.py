"""Stage 5 — diff two sides per aligned iteration, as column arithmetic.

Kernels are matched with merges (full name first, then the family key where it pairs one-to-one),
every figure is a vectorised column, classes are vectorised selects, and only the significance tests
run per kernel. Sentences (diagnosis, Amdahl text, gate reasons) are the renderer's job.

Noise model (see README "Noise model"): a change must pass every floor of the policy — relative
(``max_increase_pct``), absolute (``abs_floor_us`` per iteration per GPU) and share
(``share_floor`` of the iteration) — and be significant at ``alpha``: Mann–Whitney U on the
per-iteration samples (when both sides have ``min_iterations``) and Welch's t on per-launch
durations (when both sides have ``min_launches``), Bonferroni-combined. With neither test
possible the result is low-confidence and never called a regression.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kbase.comparison.policy import THRESHOLD_KEYS, Policy
from kbase.comparison.side import Side, Unit
from kbase.comparison.stats import mann_whitney_many, mann_whitney_p, welch_many
from kbase.enums import Confidence, KernelClass, Match

DIFF_SCHEMA = "kbase.diff/1"
CLASSES = tuple(KernelClass)
NO_KERNELS = "candidate window holds no kernels"
LIBRARY_PICKED = ("tc", "fallback")  # matmul/convolution kernels: cuBLAS/cuDNN choose among many

ROW_COLUMNS = ["class", "swap", "name", "name_before", "match", "short_name", "family", "category", "tc_before",
               "tc_after", "before", "after", "delta_ns", "delta_pct", "count_before", "count_after", "delta_count",
               "avg_before", "avg_after", "delta_avg_pct", "share_before", "share_after", "effect", "p_value", "test",
               "enough", "confidence", "ignored", "gated"]


@dataclass(frozen=True)
class TotalChange:
    before: float
    after: float
    delta_ns: float
    delta_pct: float  # NaN when before is 0


@dataclass(frozen=True)
class KernelTimeChange(TotalChange):
    """Total kernel time per unit per GPU, with its own significance test (the total rule)."""

    p_value: float = 1.0
    enough: bool = False
    regressed: bool = False


@dataclass(frozen=True)
class DiffTotals:
    unit: str  # Unit, or "mixed"
    kernel: KernelTimeChange
    compute: TotalChange
    communication: TotalChange
    memory: TotalChange
    iteration_wall: TotalChange
    step_wall: TotalChange | None = None


@dataclass
class DiffResult:
    before: Side
    after: Side
    rows: pd.DataFrame  # ROW_COLUMNS, regressions first, then by |effect on the iteration|
    totals: DiffTotals
    mismatches: list[str]
    policy: Policy
    notes: list[str] = field(default_factory=list)


def comparability(before: Side, after: Side, policy: Policy) -> list[str]:
    """Reasons the two sides do not measure the same thing (empty: comparable)."""
    out = []
    for key, what in (("workload", "workload"), ("gpu_models", "GPU model"), ("gpu_count", "GPU count"),
                      ("window_spec", "window spec")):
        a, b = getattr(before.meta, key), getattr(after.meta, key)
        if a is not None and b is not None and a != b:
            out.append(f"{what} differs: {a} vs {b}")
    if before.aligned != after.aligned:
        # per iteration on one side, per second of window on the other: no common unit
        out.append(f"iteration alignment differs: {before.unit} vs {after.unit} (one side has no iteration marker)")
    if after.kernels.empty or not after.totals.kernel:
        out.append(NO_KERNELS)
    elif before.aligned and after.aligned and after.n_units < policy.min_iteration_ratio * before.n_units:
        out.append(f"candidate has far fewer iterations ({after.n_units:g}) than the baseline ({before.n_units:g})")
    return out


def match_kernels(bk: pd.DataFrame, ak: pd.DataFrame) -> pd.DataFrame:
    """Pairs (name_before, name_after, match): by full name, then by family key where the family has
    exactly one unmatched kernel on each side; the rest are gone (before only) or new (after only)."""
    b = pd.DataFrame({"name_before": bk.index.to_numpy(object), "family": bk["family"].to_numpy(object)})
    a = pd.DataFrame({"name_after": ak.index.to_numpy(object), "family": ak["family"].to_numpy(object)})
    by_name = b.merge(a, left_on="name_before", right_on="name_after", how="outer", suffixes=("", "_a"))
    both = by_name["name_before"].notna() & by_name["name_after"].notna()
    named = by_name.loc[both, ["name_before", "name_after"]].assign(match=Match.NAME.value)
    rest_b = b[~b["name_before"].isin(named["name_before"])]
    rest_a = a[~a["name_after"].isin(named["name_after"])]
    single_b = rest_b[~rest_b["family"].duplicated(keep=False)]
    single_a = rest_a[~rest_a["family"].duplicated(keep=False)]
    fam = single_b.merge(single_a, on="family")[["name_before", "name_after"]].assign(match=Match.FAMILY.value)
    gone = rest_b.loc[~rest_b["name_before"].isin(fam["name_before"]), ["name_before"]].assign(
        name_after=None, match=Match.GONE.value)
    new = rest_a.loc[~rest_a["name_after"].isin(fam["name_after"]), ["name_after"]].assign(
        name_before=None, match=Match.NEW.value)
    return pd.concat([named, fam, gone, new], ignore_index=True)[["name_before", "name_after", "match"]]


def _side_columns(k: pd.DataFrame, names: pd.Series, suffix: str) -> pd.DataFrame:
    """The side's per-kernel columns for ``names``, row by row (NaN where the kernel is absent)."""
    pos = k.index.get_indexer(names)
    cols = ["short_name", "family", "category", "tc", "count", "avg_ns", "std_ns", "per_unit_ns", "count_per_unit"]
    out = k[cols].reset_index(drop=True).reindex(pos).reset_index(drop=True)
    out.columns = [f"{c}{suffix}" for c in cols]
    out[f"_pos{suffix}"] = pos
    return out


def compute_diff(before: Side, after: Side, policy: Policy | None = None) -> DiffResult:
    policy = policy or Policy()
    pairs = match_kernels(before.kernels, after.kernels)
    d = pd.concat([pairs, _side_columns(before.kernels, pairs["name_before"], "_b"),
                   _side_columns(after.kernels, pairs["name_after"], "_a")], axis=1)
    has_b, has_a = d["_pos_b"].to_numpy() >= 0, d["_pos_a"].to_numpy() >= 0
    ref = lambda c: d[f"{c}_a"].where(has_a, d[f"{c}_b"])  # noqa: E731 - the after side's text, else before's
    wall_b = before.unit_wall_ns if before.unit_wall_ns == before.unit_wall_ns else np.nan
    wall_a = after.unit_wall_ns
    b_ns = d["per_unit_ns_b"].astype(float).fillna(0.0).to_numpy()
    a_ns = d["per_unit_ns_a"].astype(float).fillna(0.0).to_numpy()
    delta = a_ns - b_ns
    with np.errstate(divide="ignore", invalid="ignore"):
        rows = pd.DataFrame({
            "name": d["name_after"].where(has_a, d["name_before"]), "name_before": d["name_before"],
            "match": d["match"], "short_name": ref("short_name"), "family": ref("family"),
            "category": ref("category"), "tc_before": d["tc_b"], "tc_after": d["tc_a"],
            "before": b_ns, "after": a_ns, "delta_ns": delta,
            "delta_pct": np.where(b_ns != 0, delta / b_ns * 100, np.inf),
            "count_before": d["count_per_unit_b"].astype(float).fillna(0.0),
            "count_after": d["count_per_unit_a"].astype(float).fillna(0.0),
            "avg_before": d["avg_ns_b"].astype(float), "avg_after": d["avg_ns_a"].astype(float),
            "share_before": b_ns / wall_b if wall_b else np.nan,
            "share_after": a_ns / wall_a if wall_a else np.nan,
            "effect": delta / wall_b if wall_b else np.nan,
        })
    rows["delta_count"] = rows["count_after"] - rows["count_before"]
    avg_b = rows["avg_before"].to_numpy()
    rows["delta_avg_pct"] = np.where(has_a & has_b & (avg_b != 0) & ~np.isnan(avg_b),
                                     (rows["avg_after"] - rows["avg_before"]) / np.where(avg_b == 0, 1, avg_b) * 100,
                                     np.nan)
    _significance(rows, d, before, after, policy, has_a & has_b)
    _classify(rows, policy, has_b, has_a)
    notes = _mark_algorithm_swaps(rows, policy)
    if len(rows):
        order = np.lexsort((rows["name"].astype(str).to_numpy(), -rows["effect"].abs().fillna(0).to_numpy(),
                            (rows["class"] != KernelClass.REGRESSED).to_numpy()))
        rows = rows.iloc[order].reset_index(drop=True)
    for side in (before, after):
        if not side.aligned:
            notes.append(f"not aligned: {side.label} is not iteration-aligned (compared per window-second)")
    return DiffResult(before=before, after=after, rows=rows[ROW_COLUMNS] if len(rows) else rows.reindex(
        columns=ROW_COLUMNS), totals=_totals(before, after, policy), mismatches=comparability(before, after, policy),
        policy=policy, notes=notes)


def _significance(rows: pd.DataFrame, d: pd.DataFrame, before: Side, after: Side, policy: Policy,
                  matched: np.ndarray) -> None:
    """p-value, test and enough-data flag per matched kernel: both tests for all kernels at once, then
    one light loop combining them."""
    n = len(rows)
    p = np.ones(n)
    test = np.full(n, "none", dtype=object)
    enough = np.zeros(n, dtype=bool)
    iter_ok = before.n_samples >= policy.min_iterations and after.n_samples >= policy.min_iterations
    cb, ca = d["count_b"].astype(float).to_numpy(), d["count_a"].astype(float).to_numpy()
    launch_ok = matched & (cb >= policy.min_launches) & (ca >= policy.min_launches)
    mb, ma = d["avg_ns_b"].astype(float).to_numpy(), d["avg_ns_a"].astype(float).to_numpy()
    sb, sa = d["std_ns_b"].astype(float).to_numpy(), d["std_ns_a"].astype(float).to_numpy()
    pos_b, pos_a = d["_pos_b"].to_numpy(), d["_pos_a"].to_numpy()
    hit = np.flatnonzero(matched)
    mw = np.ones(n)
    if iter_ok and len(hit):  # every matched kernel ranked at once (one sort per row, no Python loop)
        mw[hit] = mann_whitney_many(before.samples[pos_b[hit].astype(np.int64)],
                                    after.samples[pos_a[hit].astype(np.int64)])
    welch = np.ones(n)
    lk = np.flatnonzero(launch_ok)
    if len(lk):  # the t-distribution's continued fraction, for all those kernels at once
        welch[lk] = welch_many(cb[lk], mb[lk], sb[lk], ca[lk], ma[lk], sa[lk])
    for i in hit:
        ps, tests = [], []
        if iter_ok:
            ps.append(float(mw[i]))
            tests.append("mann-whitney(iterations)")
        if launch_ok[i]:
            ps.append(float(welch[i]))
            tests.append("welch(launches)")
        if ps:
            p[i], test[i], enough[i] = min(1.0, min(ps) * len(ps)), "+".join(tests), True
    rows["p_value"] = np.where(matched, p, np.nan)
    rows["test"] = test
    rows["enough"] = enough


def _per_kernel(policy: Policy, names: pd.Series, shorts: pd.Series) -> dict[str, np.ndarray]:
    """Each threshold as a column: the policy's value, or the first matching per-kernel override."""
    out = {k: np.full(len(names), float(getattr(policy, k))) for k in THRESHOLD_KEYS}
    for pattern, over in reversed(list(policy.kernels.items())):  # reversed: the first match is applied last
        hit = policy.matches(pattern, names, shorts)
        for key, value in over.items():
            out[key][hit] = value
    return out


def _classify(rows: pd.DataFrame, policy: Policy, has_b: np.ndarray, has_a: np.ndarray) -> None:
    names, shorts = rows["name"].astype(str), rows["short_name"].astype(str)
    th = _per_kernel(policy, names, shorts)
    rows["ignored"] = policy.ignored_mask(names, shorts)
    pct, dns = rows["delta_pct"].to_numpy(), rows["delta_ns"].to_numpy()
    enough = rows["enough"].to_numpy()
    share = np.fmax(rows["share_before"].to_numpy(float), rows["share_after"].to_numpy(float))
    passes = ((np.abs(pct) >= th["max_increase_pct"]) & (np.abs(dns) >= th["abs_floor_us"] * 1e3)
              & (share >= th["share_floor"]) & enough & (rows["p_value"].fillna(1.0).to_numpy() < th["alpha"]))
    matched = has_a & has_b
    rows["class"] = np.select(
        [~has_b, ~has_a, np.abs(pct) < policy.unchanged_pct, passes & (pct > 0), passes],
        [KernelClass.NEW.value, KernelClass.GONE.value, KernelClass.UNCHANGED.value, KernelClass.REGRESSED.value,
         KernelClass.IMPROVED.value], KernelClass.WITHIN_NOISE.value)
    rows["confidence"] = np.where(~matched | enough, Confidence.OK.value, Confidence.LOW.value)
    new_gated = ~has_b & (rows["share_after"].fillna(0).to_numpy() >= th["share_floor"])
    rows["gated"] = ((rows["class"] == KernelClass.REGRESSED).to_numpy() | new_gated) & ~rows["ignored"].to_numpy()
    rows["swap"] = False


def _mark_algorithm_swaps(df: pd.DataFrame, policy: Policy) -> list[str]:
    """Library algorithm swaps are not kernel regressions.

    cuDNN/cuBLAS pick a kernel per call from many candidates (autotuning, heuristics); between two
    runs work moves between matmul/convolution kernels: launch counts change, kernels appear and
    vanish, and per-launch averages shift with the mix of shapes. When the launch-count-driven
    changes among those kernels (plus the new and gone ones) net out below ``max_increase_pct`` of
    their combined time, they are one swap: each row keeps its numbers and says so, and none of
    them fails the gate on its own — the total-time rule still applies.
    """
    if not len(df):
        return []
    lib = df["tc_before"].isin(LIBRARY_PICKED) | df["tc_after"].isin(LIBRARY_PICKED)
    count_moved = (df["delta_count"].abs() >= 0.5) & (
        df["delta_count"].abs() >= 0.01 * df[["count_before", "count_after"]].max(axis=1))
    moved = lib & (count_moved | df["class"].isin([KernelClass.NEW, KernelClass.GONE]))
    if moved.sum() < 2:
        return []
    net = float(df.loc[moved, "delta_ns"].sum())
    base = float(df.loc[lib, "before"].sum())
    if not base or abs(net) / base * 100 >= policy.max_increase_pct:
        return []
    df.loc[moved, "swap"] = True
    df.loc[moved, "gated"] = False
    return [f"algorithm swap: {int(moved.sum())} matmul/convolution kernels changed launch counts or appeared/"
            f"vanished, netting {net / base:+.1%} of matmul/convolution time ({net / 1e3:+.1f} µs per iteration); "
            "not gated per kernel (cuDNN/cuBLAS picked other algorithms)"]


def _change(b: float, a: float) -> TotalChange:
    return TotalChange(before=b, after=a, delta_ns=a - b, delta_pct=(a - b) / b * 100 if b else float("nan"))


def _totals(before: Side, after: Side, policy: Policy) -> DiffTotals:
    k = _change(before.totals.kernel, after.totals.kernel)
    sb, sa = before.total_samples, after.total_samples
    enough = len(sb) >= policy.min_iterations and len(sa) >= policy.min_iterations
    p = mann_whitney_p(sb, sa) if enough else 1.0
    kernel = KernelTimeChange(**vars(k), p_value=p, enough=enough,
                              regressed=bool(enough and p < policy.alpha and k.delta_pct >= policy.total_increase_pct))
    step = None
    if before.step_wall_ns and after.step_wall_ns:
        step = _change(before.step_wall_ns, after.step_wall_ns)
    return DiffTotals(
        unit=before.unit.value if before.unit == after.unit else "mixed", kernel=kernel,
        compute=_change(before.totals.compute, after.totals.compute),
        communication=_change(before.totals.communication, after.totals.communication),
        memory=_change(before.totals.memory, after.totals.memory),
        iteration_wall=_change(before.unit_wall_ns, after.unit_wall_ns), step_wall=step)


__all__ = ["CLASSES", "DIFF_SCHEMA", "DiffResult", "DiffTotals", "KernelTimeChange", "NO_KERNELS", "ROW_COLUMNS",
           "TotalChange", "Unit", "compute_diff", "comparability", "match_kernels"]
