"""Each matched kernel's change against its own noise: the best noise source of every kernel (history, repeat
captures, per-iteration samples, launch quantiles, else the assumed run-to-run floor), its z-test at the policy's
false-positive rate over the kernels tested, and the minimum detectable effect (``comparison.noise`` holds the
estimators; ``diff.compute_diff`` the classes built on these verdicts). Also the two notes that say which sources
the decisions used."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from kbase.comparison import work
from kbase.comparison.noise import (
    RUN_NOISE_PRIOR_DF,
    SOURCES,
    Estimate,
    RunNoise,
    decide,
    iteration_estimates,
    launch_estimates,
    p_values,
    pick_noise,
    pooled_between,
    repeat_components,
    repeat_noise,
    z_threshold,
)
from kbase.comparison.side import Side, Unit

if TYPE_CHECKING:
    from kbase.comparison.history import HistoryNoise
    from kbase.policy import Policy

REGRESSED, BELOW_FLOOR, IMPROVED = 1, 2, -1  # a kernel's verdict before the class rules (0: none)


def significance(rows: dict[str, np.ndarray], pos_b: np.ndarray, pos_a: np.ndarray, before: Side, after: Side,
                  policy: Policy, th: dict[str, np.ndarray], matched: np.ndarray,
                  history: HistoryNoise | None, count_same: np.ndarray) -> tuple[np.ndarray, float]:
    """Per matched kernel: the best noise source, its z-test and the minimum detectable effect (into
    ``rows``); returns each kernel's verdict before the class rules (``REGRESSED``, ``BELOW_FLOOR``,
    ``IMPROVED``, 0) and the normal threshold at the policy's ``fpr`` over the kernels tested.
    ``count_same``: the after side's launches per unit as comparable with the before side's."""
    n = len(matched)
    cols: dict[str, np.ndarray] = {k: np.full(n, np.nan) for k in ("z", "p_value", "noise_rel", "mde_rel", "mde_ns",
                                                                     "rel", "t_crit", "run_noise_rel")}
    source = np.full(n, "", dtype=object)
    run_source = np.full(n, None, dtype=object)
    test = np.full(n, "none", dtype=object)
    enough = np.zeros(n, dtype=bool)
    verdict = np.zeros(n, dtype=np.int8)
    share = np.fmax(rows["share_before"], rows["share_after"])
    tested = int((matched & ~(share < th["share_floor"])).sum())
    cb, ca = rows["count_before"], count_same
    # per window-second, chunk totals move with the window's length; per-launch quantiles do not
    launches_first = not (before.aligned and after.aligned)
    caps = (before.levels.shape[1] if before.levels is not None else 1,
            after.levels.shape[1] if after.levels is not None else 1)
    rep_b = repeat_noise(before.levels) if before.levels is not None else np.full(len(before.kernels), np.nan)
    rep_a = repeat_noise(after.levels) if after.levels is not None else np.full(len(after.kernels), np.nan)
    between, between_df = _between_process(rows, pos_b, pos_a, before, after)
    # history's levels are per its unit: per iteration with markers, per run without (``history._run_noise``)
    use_history = history is not None and history.unit == before.unit.value
    hist = (np.array([history.sd.get(x, np.nan) for x in rows["name"].tolist()], dtype=float)
            if history is not None and use_history else np.full(n, np.nan))
    hist_df = float(history.df) if history is not None else np.inf
    resolution = max(before.resolution_ns, after.resolution_ns)
    b_ns, a_ns = rows["before"], rows["after"]
    wall = before.unit_wall_ns
    idx = np.flatnonzero(matched)
    # within-capture estimates of every matched kernel at once (numpy per kernel cost ~0.15 s at 2,000)
    per_run = before.unit == Unit.RUN  # chunk totals of fixed work trend along the run: paired where counts match
    by_iter = (iteration_estimates(before.samples[pos_b[idx]], after.samples[pos_a[idx]])
               if before.n_samples and after.n_samples else [None] * len(idx))
    with np.errstate(divide="ignore", invalid="ignore"):
        same_count = (cb[idx] > 0) & (np.abs(ca[idx] / cb[idx] - 1.0) < (work.COUNT_TOLERANCE if per_run else 0.005))
    by_launch: list[Estimate | None] = [None] * len(idx)
    if before.sketches is not None and after.sketches is not None and same_count.any():
        sel = np.flatnonzero(same_count)
        estimates = work.paired_estimates if per_run else launch_estimates
        for j, est in zip(sel.tolist(), estimates(before.sketches[pos_b[idx[sel]]],
                                                  after.sketches[pos_a[idx[sel]]], resolution)):
            by_launch[j] = est
    # the loop reads Python floats (the same values): each operation on a numpy scalar costs several times a
    # float's, and it runs per kernel (2,000 to 200,000 of them)
    cb_at, ca_at, b_at, a_at = cb.tolist(), ca.tolist(), b_ns.tolist(), a_ns.tolist()
    hist_at, between_at, between_df_at = hist.tolist(), between.tolist(), between_df.tolist()
    same_at = same_count.tolist()
    th_at = {k: v.tolist() for k, v in th.items()}
    p_at: list[int] = []
    p_df: list[float] = []
    for j, i in enumerate(idx.tolist()):
        within = [by_iter[j]]
        if per_run:  # paired by ordinal; launch counts that changed: chunk totals (a trend inflates, never hides)
            launched = min(cb_at[i], ca_at[i]) >= work.MIN_PAIRED_CHUNKS
            within = [by_launch[j]] if same_at[j] else [by_iter[j]] if launched else []
        elif same_at[j]:
            within = [by_launch[j]] if launches_first and by_launch[j] is not None else [*within, by_launch[j]]
        run_sd: RunNoise | None = None
        if math.isfinite(hist_at[i]):
            # per run, the level of a kernel of a few launches holds their own jitter, which the assumed run_noise
            # (a process's) cannot speak for: its history spread counts as measured, at its own degrees of freedom
            few = per_run and min(cb_at[i], ca_at[i]) < work.MIN_PAIRED_CHUNKS
            run_sd = RunNoise("history", hist_at[i], hist_df, prior_df=0.0 if few else RUN_NOISE_PRIOR_DF)
        elif math.isfinite(between_at[i]):  # repeat captures with iterations: their between-process component
            run_sd = RunNoise("repeat", between_at[i], between_df_at[i], True)
        else:
            # repeat captures without iterations: the spread of their levels, with enough of them (an sd from
            # 2 has 1 degree of freedom)
            enough_caps = max(caps) >= min(policy.min_history, work.MIN_REPEATS)
            rep = np.nanmax([rep_b[pos_b[i]], rep_a[pos_a[i]]]) if enough_caps else np.nan
            if np.isfinite(rep):
                run_sd = RunNoise("repeat", float(rep), float(max(caps) - 1))
        rel_means = b_at[i] and a_at[i] / b_at[i] - 1.0
        est = pick_noise(float(rel_means), within, run_sd, caps, th_at["run_noise"][i])
        z_crit = z_threshold(th_at["fpr"][i], tested)
        k = decide(est, before_ns=b_at[i], after_ns=a_at[i], wall_ns=wall, z_crit=z_crit,
                   abs_floor_ns=th_at["abs_floor_us"][i] * 1e3, share_floor=th_at["share_floor"][i],
                   rel_floor=th_at["max_increase_pct"][i] / 100, min_effect=th_at["min_effect_pct"][i] / 100,
                   with_p=False)
        if k.test != "none":  # its p-value: below, every kernel's at once
            p_at.append(i)
            p_df.append(est.df)
        for key in cols:
            cols[key][i] = est.run_rel if key == "run_noise_rel" else getattr(k, key)
        if k.source == "assumed":  # cannot judge: the change it would need to show, were repeats stored
            cols["mde_rel"][i] = work.needed_mde(z_crit, th_at["run_noise"][i], caps)
        elif per_run and k.source == "launches":  # the paired test's log ratio, as a change
            cols["mde_rel"][i] = float(np.expm1(k.mde_rel))
        source[i], test[i] = k.source, k.test
        run_source[i] = est.run_source or None
        enough[i] = k.source != "assumed"
        verdict[i] = REGRESSED if k.regressed else BELOW_FLOOR if k.below_floor else IMPROVED if k.improved else 0
    if p_at:
        cols["p_value"][p_at] = p_values(cols["z"][p_at], np.array(p_df))
    rows.update(cols)
    source[~matched] = None
    rows["noise_source"] = source
    rows["run_noise_source"] = run_source
    rows["test"] = test
    rows["enough"] = enough
    return verdict, z_threshold(policy.fpr, tested)


def _between_process(rows: dict[str, np.ndarray], pos_b: np.ndarray, pos_a: np.ndarray, before: Side,
                     after: Side) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the between-process relative sd of its kernel from the repeat captures pooled on either
    side (iteration-aligned sides: the variance components of their per-iteration samples), and its
    degrees of freedom; NaN where neither side pools two captures."""
    n = len(rows["name"])
    parts = []
    for side, pos in ((before, pos_b), (after, pos_a)):
        if not side.aligned or side.sample_capture is None or not side.pools_captures:
            continue
        sd, df = repeat_components(side.samples, side.sample_capture)
        on_rows = np.full(n, np.nan)
        on_rows[pos >= 0] = sd[pos[pos >= 0]]
        parts.append((on_rows, df))
    if not parts:
        return np.full(n, np.nan), np.zeros(n)
    return pooled_between(parts)


def noise_line(rows: dict[str, np.ndarray]) -> str | None:
    """Which noise sources the decisions used, e.g. "noise: launches 40, iterations 20, assumed 2"."""
    found = [x for x in rows.get("noise_source", np.empty(0)).tolist() if isinstance(x, str) and x]
    if not found:
        return None
    return "noise: " + ", ".join(f"{src} {found.count(src)}" for src in SOURCES if src in found) + " kernel(s)"


def between_process_line(rows: dict[str, np.ndarray], policy: Policy) -> str | None:
    """Where the between-process (run-to-run) part of the tested kernels' noise came from, the fallback stated,
    e.g. "between-process noise: history 40, assumed 2 kernel(s) (assumed: ...)"."""
    run = [x for x in rows.get("run_noise_source", np.empty(0)).tolist() if isinstance(x, str) and x]
    if not run:
        return None
    line = ("between-process noise: " + ", ".join(f"{src} {run.count(src)}" for src in ("history", "repeat", "assumed")
                                                 if src in run) + " kernel(s)")
    if "assumed" in run:
        line += (f" (assumed: run_noise {policy.run_noise:.1%} per capture, the fallback below min_history "
                 f"{policy.min_history} past baselines and without repeat captures)")
    return line
