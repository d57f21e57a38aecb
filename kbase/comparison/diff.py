"""Stage 5 — diff two sides per aligned iteration, as column arithmetic.

Kernels are matched with merges (full name first, then the family key where it pairs one-to-one),
every figure is a vectorised column, classes are vectorised selects, and only the significance tests
run per kernel. Sentences (diagnosis, Amdahl text, gate reasons) are the renderer's job.

Noise model (see README "Noise model" and ``comparison.noise``): each matched kernel's change is tested
against its own noise — run-to-run spread from history or repeat captures when the store has them,
else matched launch-duration quantiles or per-iteration samples plus a run-to-run floor — at the
policy's false-positive rate ``fpr`` per comparison; the absolute (``abs_floor_us``), share
(``share_floor``) and optional relative (``max_increase_pct``, 0 by default) floors must also hold.
Every row carries its noise source, z, p and minimum detectable effect. With no source the result is
low-confidence and never called a regression. Library algorithm swaps are reported, not gated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kbase.comparison.noise import (
    SOURCES,
    Estimate,
    decide,
    iteration_estimates,
    launch_estimates,
    pick_noise,
    repeat_noise,
    z_threshold,
)
from kbase.comparison.policy import THRESHOLD_KEYS, Policy
from kbase.comparison.side import Side, Unit
from kbase.comparison.stats import mann_whitney_p
from kbase.enums import Confidence, KernelClass, Match

DIFF_SCHEMA = "kbase.diff/2"
CLASSES = tuple(KernelClass)
NO_KERNELS = "candidate window holds no kernels"
LIBRARY_PICKED = ("tc", "fallback")  # matmul/convolution kernels: cuBLAS/cuDNN choose among many

ROW_COLUMNS = ["class", "swap", "name", "name_before", "match", "short_name", "family", "category", "tc_before",
               "tc_after", "before", "after", "delta_ns", "delta_pct", "count_before", "count_after", "delta_count",
               "avg_before", "avg_after", "delta_avg_pct", "share_before", "share_after", "effect", "p_value", "test",
               "enough", "confidence", "ignored", "gated", "rel", "z", "noise_source", "noise_rel", "mde_rel", "mde_ns"]


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
    pos = k.index.get_indexer(pd.Index(names))
    cols = ["short_name", "family", "category", "tc", "count", "avg_ns", "std_ns", "per_unit_ns", "count_per_unit"]
    out = k[cols].reset_index(drop=True).reindex(pos).reset_index(drop=True)
    out.columns = [f"{c}{suffix}" for c in cols]
    out[f"_pos{suffix}"] = pos
    return out


def compute_diff(before: Side, after: Side, policy: Policy | None = None,
                 history: pd.Series | None = None) -> DiffResult:
    """``history``: per kernel name, the relative run-to-run sd from past baselines (``noise.history_noise``)."""
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
    _significance(rows, d, before, after, policy, has_a & has_b, history)
    _classify(rows, policy, has_b, has_a)
    notes = _mark_algorithm_swaps(rows, policy)
    line = noise_line(rows)
    if line:
        notes.append(line)
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
                  matched: np.ndarray, history: pd.Series | None) -> None:
    """Per matched kernel: the best noise source, its z-test and the minimum detectable effect."""
    n = len(rows)
    cols: dict[str, np.ndarray] = {k: np.full(n, np.nan) for k in ("z", "p_value", "noise_rel", "mde_rel", "mde_ns",
                                                                     "rel")}
    source = np.full(n, "", dtype=object)
    test = np.full(n, "none", dtype=object)
    enough = np.zeros(n, dtype=bool)
    verdict = np.zeros(n, dtype=np.int8)  # 1 regressed, -1 improved (before the class rules)
    names, shorts = rows["name"].astype(str), rows["short_name"].astype(str)
    th = _per_kernel(policy, names, shorts)
    share = np.fmax(rows["share_before"].to_numpy(float), rows["share_after"].to_numpy(float))
    tested = int((matched & ~(share < th["share_floor"])).sum())
    pos_b, pos_a = d["_pos_b"].to_numpy(), d["_pos_a"].to_numpy()
    cb, ca = d["count_per_unit_b"].astype(float).to_numpy(), d["count_per_unit_a"].astype(float).to_numpy()
    caps = (before.levels.shape[1] if before.levels is not None else 1,
            after.levels.shape[1] if after.levels is not None else 1)
    rep_b = repeat_noise(before.levels) if before.levels is not None else np.full(len(before.kernels), np.nan)
    rep_a = repeat_noise(after.levels) if after.levels is not None else np.full(len(after.kernels), np.nan)
    hist = history.reindex(rows["name"]).to_numpy(float) if history is not None else np.full(n, np.nan)
    hist_df = float(history.attrs.get("df", policy.min_history - 1)) if history is not None else np.inf
    resolution = max(before.resolution_ns, after.resolution_ns)
    b_ns, a_ns = rows["before"].to_numpy(float), rows["after"].to_numpy(float)
    wall = before.unit_wall_ns
    idx = np.flatnonzero(matched)
    # within-capture estimates of every matched kernel at once (numpy per kernel cost ~0.15 s at 2,000)
    by_iter = (iteration_estimates(before.samples[pos_b[idx]], after.samples[pos_a[idx]])
               if before.n_samples and after.n_samples else [None] * len(idx))
    with np.errstate(divide="ignore", invalid="ignore"):
        same_count = (cb[idx] > 0) & (np.abs(ca[idx] / cb[idx] - 1.0) < 0.005)
    by_launch: list[Estimate | None] = [None] * len(idx)
    if before.sketches is not None and after.sketches is not None and same_count.any():
        sel = np.flatnonzero(same_count)
        for j, est in zip(sel.tolist(), launch_estimates(before.sketches[pos_b[idx[sel]]],
                                                         after.sketches[pos_a[idx[sel]]], resolution)):
            by_launch[j] = est
    for j, i in enumerate(idx.tolist()):
        within = [by_iter[j]]
        if same_count[j]:
            within.append(by_launch[j])
        run_sd: tuple[str, float, float] | None = None
        if np.isfinite(hist[i]):
            run_sd = ("history", float(hist[i]), hist_df)
        else:
            # repeat captures: like history, only with enough of them (an sd from 2 has 1 degree of freedom)
            rep = np.nanmax([rep_b[pos_b[i]], rep_a[pos_a[i]]]) if max(caps) >= policy.min_history else np.nan
            if np.isfinite(rep):
                run_sd = ("repeat", float(rep), float(max(caps) - 1))
        rel_means = b_ns[i] and a_ns[i] / b_ns[i] - 1.0
        est = pick_noise(float(rel_means), within, run_sd, caps, th["run_noise"][i])
        z_crit = z_threshold(th["fpr"][i], tested)
        k = decide(est, before_ns=b_ns[i], after_ns=a_ns[i], wall_ns=wall, z_crit=z_crit,
                   abs_floor_ns=th["abs_floor_us"][i] * 1e3, share_floor=th["share_floor"][i],
                   rel_floor=th["max_increase_pct"][i] / 100)
        for key in cols:
            cols[key][i] = getattr(k, key)
        source[i], test[i] = k.source, k.test
        enough[i] = k.source != "assumed"
        verdict[i] = 1 if k.regressed else -1 if k.improved else 0
    for key, values in cols.items():
        rows[key] = values
    source[~matched] = None
    rows["noise_source"] = source
    rows["test"] = test
    rows["enough"] = enough
    rows["_verdict"] = verdict


def noise_line(rows: pd.DataFrame) -> str | None:
    """Which noise sources the decisions used, e.g. "noise: launches 40, iterations 20, assumed 2"."""
    if not len(rows) or "noise_source" not in rows:
        return None
    counts = rows["noise_source"].dropna().value_counts()
    if not len(counts):
        return None
    return "noise: " + ", ".join(f"{src} {int(counts[src])}" for src in SOURCES if src in counts) + " kernel(s)"


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
    rows["ignored"] = policy.ignored_mask(names.tolist(), shorts.tolist())
    pct = rows["delta_pct"].to_numpy()
    enough = rows["enough"].to_numpy()
    v = rows.pop("_verdict").to_numpy()
    matched = has_a & has_b
    rows["class"] = np.select(
        [~has_b, ~has_a, v > 0, v < 0, np.abs(pct) < policy.unchanged_pct],
        [KernelClass.NEW.value, KernelClass.GONE.value, KernelClass.REGRESSED.value, KernelClass.IMPROVED.value,
         KernelClass.UNCHANGED.value], KernelClass.WITHIN_NOISE.value)
    rows["confidence"] = np.where(~matched | enough, Confidence.OK.value, Confidence.LOW.value)
    new_gated = ~has_b & (rows["share_after"].fillna(0).to_numpy() >= th["share_floor"])
    rows["gated"] = ((rows["class"] == KernelClass.REGRESSED).to_numpy() | new_gated) & ~rows["ignored"].to_numpy()
    rows["swap"] = False


def _mark_algorithm_swaps(df: pd.DataFrame, policy: Policy) -> list[str]:
    """Library algorithm swaps are not kernel regressions.

    cuDNN/cuBLAS pick a kernel per call from many candidates (autotuning, heuristics); between two
    runs work moves between matmul/convolution kernels: launch counts change, kernels appear and
    vanish, and per-launch averages shift with the mix of shapes. When the launch-count-driven
    changes among those kernels (plus the new and gone ones) net out below ``swap_net_pct`` of
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
    if not base or abs(net) / base * 100 >= policy.swap_net_pct:
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
