"""Per-kernel noise and the per-kernel decision (docs/noise-model.md).

A kernel's change is an estimate ``rel`` (after/before - 1) with a standard error ``se`` from the best
noise source available for that kernel:

- ``history``: the spread of the kernel's per-iteration time across the last N comparable baselines of
  the workload (a robust estimate: median absolute successive difference, so past steps do not inflate
  it); the run-to-run noise itself. Used when at least ``min_history`` levels exist.
- ``repeat``: several captures of one commit (either side pooled repeat captures, each its own process): the
  between-process variance component of their per-iteration samples (one-way random effects: the spread
  of the capture means beyond what the iteration-to-iteration spread explains), added to this comparison's
  own within-capture estimate.
- ``launches``: matched launch-duration quantiles, chunk by chunk (``sketch``); robust to shape mixes.
- ``iterations``: the per-iteration samples of each side (or per-chunk totals without markers).
- ``assumed``: nothing measured; the kernel is low-confidence and never called a regression.

Within-capture sources (``launches``, ``iterations``) do not see run-to-run (between-process) variance: where
neither history nor repeat captures measure it, the assumed ``run_noise`` (relative, per capture) is added in
quadrature — the stated fallback. A measured between-process sd is moderated with that assumption as prior
evidence. The decision is a z-test at a false-positive rate ``fpr`` per comparison, Bonferroni-split over the
kernels that could be flagged; the minimum detectable effect (MDE) is the change detected with 80% power at
that threshold, between-process noise included. A significant regression whose effect on the iteration is
under ``min_effect`` is ``below_floor``: shown, never failing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

from kbase.analysis.sketch import QUANTILES
from kbase.comparison import sketch
from kbase.comparison.levels import level_noise
from kbase.comparison.stats import t_two_sided_p, t_two_sided_p_many, t_two_sided_quantile

POWER_Z = NormalDist().inv_cdf(0.8)
FLOOR_CONFIDENCE = 0.95  # a significant regression is "below the gate floor" only when this sure its effect is
SOURCES = ("history", "repeat", "launches", "iterations", "assumed")


@dataclass(frozen=True)
class Estimate:
    rel: float  # relative change, after/before - 1
    se: float  # its standard error (relative), within-capture only for launches/iterations
    source: str
    n: int  # samples behind it (iterations, chunks or runs)
    df: float = math.inf  # degrees of freedom of ``se`` (small samples: Student's t, not the normal)
    run_source: str = ""  # where the between-process (run-to-run) part of ``se`` came from: history, repeat, assumed
    run_rel: float = math.nan  # that relative sd per capture


RUN_NOISE_PRIOR_DF = 10.0  # what the assumed ``run_noise`` weighs against measured run-to-run noise


class RunNoise(NamedTuple):
    """A measured run-to-run sd: ``between`` False for the sd of per-capture levels (history: a level's own
    sampling noise included), True for the between-process component alone (repeat captures)."""

    source: str
    sd: float
    df: float
    between: bool = False
    # what the assumed ``run_noise`` weighs against it, in degrees of freedom: 0 where it cannot speak for the
    # spread (per run, a kernel of a few launches: its level holds their own jitter, not only the process's)
    prior_df: float = RUN_NOISE_PRIOR_DF


@dataclass(frozen=True)
class KernelDecision:
    rel: float
    delta_ns: float
    effect: float
    noise_rel: float  # standard error of rel used by the test (floors included)
    source: str
    test: str
    z: float
    p_value: float
    mde_rel: float
    mde_ns: float
    regressed: bool
    improved: bool
    below_floor: bool = False  # a significant regression under ``min_effect`` of the iteration: shown, not gated
    t_crit: float = math.nan  # |z| needed at the estimate's degrees of freedom


def iteration_estimate(before: np.ndarray, after: np.ndarray, min_samples: int = 3) -> Estimate | None:
    """Mean change and its standard error from per-iteration samples of each side."""
    return iteration_estimates(np.asarray(before, float)[None], np.asarray(after, float)[None], min_samples)[0]


def iteration_estimates(before: np.ndarray, after: np.ndarray, min_samples: int = 3) -> list[Estimate | None]:
    """``iteration_estimate`` of every row pair (kernels x iterations of each side) at once: a
    per-kernel loop of numpy calls cost ~0.1 s at 2,000 kernels."""
    nb, na = before.shape[1], after.shape[1]
    if nb < min_samples or na < min_samples:
        return [None] * len(before)
    mb, ma = before.mean(axis=1), after.mean(axis=1)
    vb, va = before.var(axis=1, ddof=1) / nb, after.var(axis=1, ddof=1) / na
    out: list[Estimate | None] = []
    for b_mean, a_mean, b_var, a_var in zip(mb.tolist(), ma.tolist(), vb.tolist(), va.tolist()):
        if b_mean <= 0:
            out.append(None)
            continue
        v = b_var + a_var
        df = v * v / (b_var * b_var / (nb - 1) + a_var * a_var / (na - 1)) if v > 0 else math.inf  # Welch
        out.append(Estimate(rel=a_mean / b_mean - 1.0, se=math.sqrt(v) / b_mean, source="iterations",
                            n=min(nb, na), df=df))
    return out


def launch_estimate(before: np.ndarray | None, after: np.ndarray | None, resolution_ns: float = 0.0) -> Estimate | None:
    """Matched-quantile change of launch durations (``sketch.compare``); the timer's resolution bounds
    the standard error from below (quantiles of microsecond-rounded durations)."""
    if before is None or after is None:
        return None
    return launch_estimates(before[None], after[None], resolution_ns)[0]


def launch_estimates(before: np.ndarray, after: np.ndarray, resolution_ns: float = 0.0) -> list[Estimate | None]:
    """``launch_estimate`` of every kernel's sketches ((k, CHUNKS, WIDTH) each side) at once."""
    rel, se, chunks = sketch.compare_many(before, after)
    q = before[:, :, : QUANTILES].reshape(len(before), -1)
    have = np.isfinite(q)
    with np.errstate(divide="ignore", invalid="ignore"):
        typical = np.where(have, q, 0.0).sum(axis=1) / have.sum(axis=1)
    out: list[Estimate | None] = []
    for r, s, c, t in zip(rel.tolist(), se.tolist(), chunks.tolist(), typical.tolist()):
        if not math.isfinite(r) or not t > 0:
            out.append(None)
            continue
        floor = resolution_ns / math.sqrt(12.0) / t / math.sqrt(c * QUANTILES)
        out.append(Estimate(rel=r, se=max(s, floor), source="launches", n=c, df=float(c - 1)))
    return out


def history_noise(levels: np.ndarray, min_history: int) -> np.ndarray:
    """Per kernel (rows) relative run-to-run sd from the last N baselines' levels (columns, oldest
    first; NaN where the kernel did not run); NaN where fewer than ``min_history`` levels."""
    out = np.full(levels.shape[0], np.nan)
    for i, row in enumerate(levels):
        if np.isfinite(row).sum() >= min_history:
            out[i] = level_noise(row)
    return out


def repeat_noise(levels: np.ndarray) -> np.ndarray:
    """Per kernel relative sd across repeat captures of one commit (columns); NaN with fewer than 2."""
    if levels.ndim != 2 or levels.shape[1] < 2:
        return np.full(levels.shape[0] if levels.ndim else 0, np.nan)
    mean = levels.mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mean > 0, levels.std(axis=1, ddof=1) / mean, np.nan)


def repeat_components(samples: np.ndarray, capture: np.ndarray) -> tuple[np.ndarray, float]:
    """Per row (kernel or op) of per-iteration ``samples`` pooled from several captures (``capture``: each
    column's capture), the between-process relative sd — one-way random effects: (mean square between
    captures - mean square within) / n0, at least 0 — and its degrees of freedom (captures - 1). NaN rows
    with fewer than 2 captures or no time."""
    caps = np.unique(capture)
    n_rows = samples.shape[0]
    if len(caps) < 2 or samples.shape[1] <= len(caps):
        return np.full(n_rows, np.nan), 0.0
    n_j = np.array([(capture == c).sum() for c in caps], dtype=float)
    means = np.stack([samples[:, capture == c].mean(axis=1) for c in caps], axis=1)
    total_n = n_j.sum()
    grand = (means * n_j).sum(axis=1) / total_n
    within = sum(((samples[:, capture == c] - means[:, [j]]) ** 2).sum(axis=1) for j, c in enumerate(caps))
    ms_within = within / (total_n - len(caps))
    ms_between = ((means - grand[:, None]) ** 2 * n_j).sum(axis=1) / (len(caps) - 1)
    n0 = (total_n - (n_j * n_j).sum() / total_n) / (len(caps) - 1)
    var_b = np.maximum(ms_between - ms_within, 0.0) / n0
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(grand > 0, np.sqrt(var_b) / grand, np.nan), float(len(caps) - 1)


def pooled_between(parts: list[tuple[np.ndarray, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' ``repeat_components`` pooled per row (variances weighted by degrees of freedom): (sd, df)."""
    var = sum(np.nan_to_num(sd * sd, nan=0.0) * df for sd, df in parts)
    df = sum(np.where(np.isfinite(sd), df, 0.0) for sd, df in parts)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(df > 0, np.sqrt(var / df), np.nan), np.asarray(df, dtype=float)


def assumed_noise() -> Estimate:
    return Estimate(rel=float("nan"), se=float("nan"), source="assumed", n=0)




def pick_noise(rel_means: float, within: list[Estimate | None], run_sd: RunNoise | tuple[str, float, float] | None,
               captures: tuple[int, int], run_noise: float) -> Estimate:
    """The change and its standard error, between-process noise included.

    - history (``run_sd`` of levels): the moderated run-to-run sd of one capture's level on the mean change;
    - repeat (``run_sd.between``): the within-capture estimate with the smallest minimum detectable effect
      plus the moderated between-process variance per capture (Welch–Satterthwaite degrees of freedom);
    - else (the fallback): that within-capture estimate plus the assumed ``run_noise`` (a known constant: the
      degrees of freedom grow as it dominates).

    A measured sd is pooled with the assumed ``run_noise`` as ``RUN_NOISE_PRIOR_DF`` degrees of freedom
    of prior evidence (moderated variance, as limma does for many features with few samples): a young
    history (5 baselines: ~2 degrees of freedom from its robust sd) no longer makes the test blind
    (Student's t at 2 df needs ~10x the noise), and a long one speaks for itself."""
    if run_sd is not None and not isinstance(run_sd, RunNoise):
        run_sd = RunNoise(*run_sd)  # (source, sd, df): the sd of levels
    found = [e for e in within if e is not None and math.isfinite(e.se)]
    best = min(found, key=lambda e: e.se * t_threshold(0.001, e.df)) if found else None  # the smallest MDE
    per = 1 / captures[0] + 1 / captures[1]
    if run_sd is not None and math.isfinite(run_sd.sd) and math.isfinite(rel_means):
        source, sd, df, prior = run_sd.source, run_sd.sd, run_sd.df, run_sd.prior_df
        var_run = (prior * run_noise * run_noise + df * sd * sd) / (prior + df)
        if not run_sd.between:
            return Estimate(rel=rel_means, se=math.sqrt(var_run * per), source=source, n=captures[0] + captures[1],
                            df=prior + df, run_source=source, run_rel=math.sqrt(var_run))
        if best is not None:
            v, b = best.se * best.se, var_run * per
            within_part = v * v / best.df if math.isfinite(best.df) else 0.0
            dfs = (v + b) ** 2 / (within_part + b * b / (prior + df))
            return Estimate(rel=best.rel, se=math.sqrt(v + b), source=source, n=best.n, df=dfs, run_source=source,
                            run_rel=math.sqrt(var_run))
    if best is None:
        return assumed_noise()
    floor = run_noise * run_noise * per
    var = best.se * best.se
    df = (var + floor) ** 2 / (var * var / best.df) if var > 0 and math.isfinite(best.df) else math.inf
    return Estimate(rel=best.rel, se=math.sqrt(var + floor), source=best.source, n=best.n, df=df,
                    run_source="assumed", run_rel=run_noise)


@lru_cache(maxsize=256)
def z_threshold(fpr: float, tested: int) -> float:
    """Two-sided z threshold for a false-positive rate ``fpr`` per comparison over ``tested`` kernels."""
    return NormalDist().inv_cdf(1.0 - fpr / (2.0 * max(tested, 1)))


@lru_cache(maxsize=4096)
def _t_quantile(p_two_sided: float, df_key: float) -> float:
    z = NormalDist().inv_cdf(1.0 - p_two_sided / 2.0)
    return z if math.isinf(df_key) else t_two_sided_quantile(p_two_sided, df_key, z)


# (p, df key) -> |t|: a diff asks ~5 per kernel, of few pairs. Bounded: the p of a z threshold depends on the
# kernels tested, so a process running many diffs (calibration, bisect) meets new ones; past the bound it starts over.
_THRESHOLDS: dict[tuple[float, float], float] = {}
_THRESHOLDS_MAX = 1 << 16


def t_threshold(p_two_sided: float, df: float) -> float:
    """|t| with two-sided tail ``p_two_sided`` at ``df`` degrees of freedom (df rounded down to 0.5;
    over 1000: the normal)."""
    key = math.inf if not math.isfinite(df) or df > 1000 else max(math.floor(df * 2) / 2, 1.0)
    found = _THRESHOLDS.get((p_two_sided, key))
    if found is None:  # (p rounded to 6 digits: the same threshold for p's that differ in the last bits)
        if len(_THRESHOLDS) >= _THRESHOLDS_MAX:
            _THRESHOLDS.clear()
        found = _THRESHOLDS[p_two_sided, key] = _t_quantile(float(f"{p_two_sided:.6g}"), key)
    return found


def _same_sign(a: float, b: float) -> bool:
    """``np.sign(a) == np.sign(b)`` on Python floats (False when either is NaN)."""
    if a != a or b != b:
        return False
    return (a > 0) - (a < 0) == (b > 0) - (b < 0)


def decide(est: Estimate, *, before_ns: float, after_ns: float, wall_ns: float, z_crit: float, abs_floor_ns: float,
           share_floor: float, rel_floor: float, min_effect: float = 0.0, with_p: bool = True) -> KernelDecision:
    """Regressed/improved when |rel| exceeds ``z_crit`` standard errors (as a normal tail probability,
    carried to Student's t at the estimate's degrees of freedom) and the floors hold (absolute
    change per iteration, share of the iteration, optional relative floor), in the same direction as
    the change of the kernel's time per iteration. A regression whose effect on the iteration (Δ / iteration
    time) is, with ``FLOOR_CONFIDENCE``, under ``min_effect`` (its one-sided upper confidence bound is) is
    ``below_floor`` instead: significant, shown, not gated. The bound, not the estimate, is compared so that
    a real regression at the floor fails the gate (an estimate alone would miss half of those).
    ``with_p`` False: ``p_value`` NaN, for a caller that computes every kernel's at once (``p_values``); the
    verdict never reads it."""
    delta = after_ns - before_ns
    share = max(before_ns, after_ns) / wall_ns if wall_ns and wall_ns == wall_ns else float("nan")
    effect = delta / wall_ns if wall_ns and wall_ns == wall_ns else float("nan")
    if est.source == "assumed" or not math.isfinite(est.se) or before_ns <= 0:
        return KernelDecision(rel=est.rel, delta_ns=delta, effect=effect, noise_rel=float("nan"), source=est.source,
                              test="none", z=float("nan"), p_value=float("nan"), mde_rel=float("nan"),
                              mde_ns=float("nan"), regressed=False, improved=False)
    se = max(est.se, 1e-12)
    z = est.rel / se
    p = p_value(z, est.df) if with_p else math.nan
    z_crit = t_threshold(math.erfc(z_crit / math.sqrt(2.0)), est.df)
    mde_rel = (z_crit + POWER_Z) * se
    mde_ns = max(mde_rel * before_ns, abs_floor_ns)
    passes = (abs(z) >= z_crit and abs(delta) >= abs_floor_ns and (share >= share_floor or share != share)
              and abs(delta) / before_ns >= rel_floor and _same_sign(delta, est.rel))
    upper = effect + t_threshold(2 * (1 - FLOOR_CONFIDENCE), est.df) * se * before_ns / wall_ns if wall_ns else effect
    small = bool(passes and delta > 0 and effect == effect and upper < min_effect)
    return KernelDecision(rel=est.rel, delta_ns=delta, effect=effect, noise_rel=se, source=est.source,
                          test=f"z({est.source})", z=z, p_value=p, mde_rel=mde_rel, mde_ns=mde_ns,
                          regressed=bool(passes and delta > 0 and not small), improved=bool(passes and delta < 0),
                          below_floor=small, t_crit=z_crit)


def p_value(z: float, df: float) -> float:
    """Two-sided p of ``z`` at ``df`` degrees of freedom (Student's t; infinite df: the normal)."""
    return t_two_sided_p(abs(z), df) if math.isfinite(df) else math.erfc(abs(z) / math.sqrt(2.0))


def p_values(z: np.ndarray, df: np.ndarray) -> np.ndarray:
    """``p_value`` of every (z, df) pair, bit for bit: the t tails at once."""
    z, df = np.asarray(z, dtype=float), np.asarray(df, dtype=float)
    out = np.empty(len(z))
    student = np.isfinite(df)
    out[student] = t_two_sided_p_many(np.abs(z[student]), df[student])
    for i in np.flatnonzero(~student).tolist():
        out[i] = math.erfc(abs(float(z[i])) / math.sqrt(2.0))
    return out
