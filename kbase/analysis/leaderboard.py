"""The kernel leaderboard of a window: one row per kernel, plus a summary and per-iteration samples.

Two share denominators, both always labelled:
- ``share_window``: of the window's GPU time = window length × GPUs (idle time included), the one
  Amdahl's law needs: a kernel with share p sped up s× gives 1/(1−p+p/s), at most 1/(1−p);
- ``share_kernel``: of the total kernel time in the window.
``per_iter_ns`` is the kernel's time per iteration per GPU (total / iterations / GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from kbase.analysis import classify
from kbase.analysis.amdahl import amdahl  # noqa: F401 - re-exported (its home before)
from kbase.analysis.summary import COLUMNS, LeaderboardSummary  # noqa: F401 - re-exported (their home before)
from kbase.analysis.window import Window

# Shape thresholds (of total kernel time).
DOMINANT_SHARE = 0.50
HEAVY_SHARE = 0.30
FLAT_TOP5 = 0.40
# Fragmented: very many launches of a tiny kernel — a fusion problem, not a heavyweight.
FRAGMENTED_AVG_NS = 10_000
FRAGMENTED_PER_ITER = 500
FRAGMENTED_COUNT = 10_000


@dataclass
class Leaderboard:
    table: pd.DataFrame  # COLUMNS (plus "gpu" first in a per-GPU view), sorted by total_ns desc
    summary: LeaderboardSummary
    samples: pd.DataFrame  # name, iteration, count, total_ns (summed over GPUs)
    notes: list[str] = field(default_factory=list)
    sketches: dict[str, np.ndarray] = field(default_factory=dict)  # name -> launch sketch (comparison.sketch)


def group_stats(group: np.ndarray, dur: np.ndarray, n_groups: int) -> dict[str, np.ndarray]:
    """count, total, mean, median, min, max and sample std of ``dur`` per group code.

    One sort of a composite (group << 40 | duration) key gives every group's durations in order
    (min, max, median by position); sums are bincounts. ~10x faster than a pandas groupby with
    median on 10M launches, and exact in integer ns.
    """
    dur = np.clip(dur, 0, (1 << 40) - 1, out=dur if dur.dtype == np.int64 else None).astype(np.int64, copy=False)
    count = np.bincount(group, minlength=n_groups).astype(np.int64)
    total = np.bincount(group, weights=dur, minlength=n_groups)
    ordered = group.astype(np.int64) << 40
    ordered |= dur
    ordered.sort()  # in place: one extra array, not three
    ordered &= (1 << 40) - 1
    first = np.concatenate([[0], np.cumsum(count)[:-1]])
    present = count > 0
    safe_first = np.where(present, first, 0)
    last = np.where(present, first + count - 1, 0)
    mean = np.divide(total, count, out=np.zeros(n_groups), where=present)
    ss = np.zeros(n_groups)
    for i in range(0, len(dur), 1 << 20):  # chunked: no 10M-long float temporaries
        g = group[i : i + (1 << 20)]
        dev = dur[i : i + (1 << 20)] - mean[g]
        ss += np.bincount(g, weights=dev * dev, minlength=n_groups)
    std = np.sqrt(np.divide(ss, count - 1, out=np.zeros(n_groups), where=count > 1))
    lo = ordered[safe_first + np.maximum(count - 1, 0) // 2]
    hi = ordered[safe_first + count // 2 - (count == 0)]
    return {
        "count": count,
        "total_ns": np.rint(total).astype(np.int64),
        "avg_ns": mean,
        "median_ns": (lo + hi) / 2.0,
        "min_ns": ordered[safe_first],
        "max_ns": ordered[last],
        "std_ns": std,
        "present": present,
    }


def _aggregate(codes: np.ndarray, gpu: np.ndarray, dur: np.ndarray, categories, per_gpu: bool) -> pd.DataFrame:
    n_names = len(categories)
    n_gpu = int(gpu.max()) + 1 if len(gpu) else 1
    group = gpu.astype(np.int64) * n_names + codes if per_gpu else codes
    stats = group_stats(group, dur, n_gpu * n_names if per_gpu else n_names)
    present = stats.pop("present")
    idx = np.nonzero(present)[0]
    out = pd.DataFrame({key: v[idx] for key, v in stats.items()})
    names = np.asarray(categories, dtype=object)
    out.insert(0, "name", names[idx % n_names])
    if per_gpu:
        out.insert(0, "gpu", (idx // n_names).astype(np.int64))
        out["gpus"] = 1
    else:
        seen = np.zeros(n_names * n_gpu, dtype=bool)
        for lo in range(0, len(codes), 1 << 20):
            seen[codes[lo : lo + (1 << 20)].astype(np.int64) * n_gpu + gpu[lo : lo + (1 << 20)]] = True
        out["gpus"] = seen.reshape(n_names, n_gpu).sum(axis=1)[idx]
    return out


def build_leaderboard(window: Window, per_gpu: bool = False) -> Leaderboard:
    categories = window.profile.kernels["name"].cat.categories
    codes = window.column("name")
    gpu = window.column("gpu")
    dur = window.column("end")
    dur -= window.column("start")
    t = _aggregate(codes, gpu, dur, categories, per_gpu)
    profile = window.profile
    names = t["name"].drop_duplicates()
    info = pd.DataFrame(
        {
            "name": names,
            "short_name": [classify.short_name(n, profile.short_names.get(n)) for n in names],
            "family": [classify.family_key(n) for n in names],
            "category": [classify.category(n) for n in names],
            "tc": [classify.tensor_core_state(n)[0] for n in names],
        }
    )
    t = t.merge(info, on="name", how="left")
    n_it = window.n_iterations
    n_gpus = max(window.n_gpus, 1)
    total_kernel = int(dur.sum())
    gpus_per_row = 1 if per_gpu else n_gpus
    if n_it:
        t["per_iter_ns"] = t["total_ns"] / (n_it * gpus_per_row)
        t["count_per_iter"] = t["count"] / (n_it * gpus_per_row)
    else:
        t["per_iter_ns"] = np.nan
        t["count_per_iter"] = np.nan
    denom = window.length_ns * gpus_per_row if per_gpu else window.gpu_ns
    t["share_window"] = t["total_ns"] / denom if denom else np.nan
    t["share_kernel"] = t["total_ns"] / total_kernel if total_kernel else np.nan
    t["amdahl_ceiling"] = [amdahl(p) for p in t["share_window"].fillna(0)]
    many = (t["count_per_iter"] >= FRAGMENTED_PER_ITER) if n_it else (t["count"] >= FRAGMENTED_COUNT)
    t["fragmented"] = many & (t["avg_ns"] < FRAGMENTED_AVG_NS)
    for col in ("count", "total_ns", "min_ns", "max_ns", "gpus"):
        t[col] = t[col].astype("int64")
    t = t.sort_values(["total_ns", "name"], ascending=[False, True], kind="stable").reset_index(drop=True)
    cols = (["gpu"] if per_gpu else []) + COLUMNS
    table = t[cols]

    samples = _samples(codes, dur, window, categories)
    del codes, gpu, dur
    summary = _summary(window, t if not per_gpu else _aggregate_view(t), total_kernel)
    return Leaderboard(table=table, summary=summary, samples=samples, notes=list(window.notes))


def _samples(codes: np.ndarray, dur: np.ndarray, window: Window, categories) -> pd.DataFrame:
    """Per (kernel, iteration): launches and total ns summed over GPUs (the diff's samples).
    Chunked bincounts over a (kernel, iteration) code: no full-length temporaries."""
    keys = np.asarray(window.iteration_keys, dtype=np.int64)
    it = window.column("iteration")
    n = len(categories) * max(len(keys), 1)
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros(n)
    if len(keys):
        for lo in range(0, len(it), 1 << 20):
            sl = slice(lo, lo + (1 << 20))
            inside = it[sl] >= 0
            group = codes[sl][inside].astype(np.int64) * len(keys) + np.searchsorted(keys, it[sl][inside])
            count += np.bincount(group, minlength=n)
            total += np.bincount(group, weights=dur[sl][inside], minlength=n)
    g = np.nonzero(count)[0]
    names = np.asarray(categories, dtype=object)
    return pd.DataFrame({"name": pd.Series(names[g // max(len(keys), 1)], dtype=object),  # no Arrow copy per sample
                         "iteration": keys[g % len(keys)] if len(keys) else np.zeros(0, dtype=np.int64),
                         "count": count[g], "total_ns": np.rint(total[g]).astype(np.int64)})


def _aggregate_view(t: pd.DataFrame) -> pd.DataFrame:
    summed = t.groupby(["name", "category"], as_index=False)["total_ns"].sum()
    return summed.sort_values("total_ns", ascending=False)  # type: ignore[call-overload]  # stubs: DataFrame


def _summary(window: Window, t: pd.DataFrame, total_kernel: int) -> LeaderboardSummary:
    by_cat = t.groupby("category")["total_ns"].sum()
    comp = int(by_cat.get(classify.COMPUTE, 0))
    comm = int(by_cat.get(classify.COMMUNICATION, 0))
    mem = int(by_cat.get(classify.MEMORY, 0))
    gpu_ns = window.gpu_ns
    shares = (t["total_ns"] / total_kernel).tolist() if total_kernel else []
    top1 = shares[0] if shares else 0.0
    top5 = float(sum(shares[:5]))
    shape = []
    if top1 > DOMINANT_SHARE:
        shape.append(f"dominated: one kernel holds {top1:.0%} of kernel time (> 50%)")
    elif top1 > HEAVY_SHARE:
        shape.append(f"heavy top: one kernel holds {top1:.0%} of kernel time (> 30%)")
    if top5 < FLAT_TOP5:
        shape.append(f"flat: top five hold {top5:.0%} of kernel time (< 40%)")
    n_frag = int(t["fragmented"].sum()) if "fragmented" in t else 0
    if n_frag:
        shape.append(f"fragmented: {n_frag} kernel(s) with very many tiny launches (fusion candidates)")
    if not shape:
        shape.append("balanced")
    p = window.profile
    n_it = window.n_iterations
    return LeaderboardSummary(
        source=str(p.source),
        format=p.format,
        exporter=p.exporter_version,
        gpu_models=p.gpu_models,
        gpus=window.n_gpus,
        window=window.describe(),
        aligned=window.aligned,
        mode=window.mode,
        marker=window.marker,
        iterations=n_it,
        iteration_keys=list(window.iteration_keys),
        warmup_skipped=window.warmup_skipped,
        window_start_ns=window.start_ns,
        window_end_ns=window.end_ns,
        window_ns=window.length_ns,
        window_gpu_ns=gpu_ns,
        total_kernel_ns=total_kernel,
        kernel_ns_per_iter=(total_kernel / (n_it * window.n_gpus)) if n_it else None,
        compute_ns=comp,
        communication_ns=comm,
        memory_ns=mem,
        busy_share=total_kernel / gpu_ns if gpu_ns else None,
        compute_share=comp / gpu_ns if gpu_ns else None,
        communication_share=comm / gpu_ns if gpu_ns else None,
        memory_share=mem / gpu_ns if gpu_ns else None,
        share_denominator=f"window {window.length_ns / 1e9:.6f} s x {window.n_gpus} GPU(s) = {gpu_ns / 1e9:.6f} GPU-s",
        top1_share_kernel=top1,
        top5_share_kernel=top5,
        shape=shape,
        kernels=int(len(t)),
        launches=window.n_launches,
        unattributed_no_launch=window.no_launch,
        outside_iterations=window.outside,
        step_wall_ns=_mean_step_wall(p, window.iteration_keys),
    )


def _mean_step_wall(profile, keys: list[int]) -> float | None:
    """Mean CPU wall time of the window's steps, where the reader measured it (Kineto)."""
    walls = profile.extra.get("step_wall_ns") or {}
    wanted = set(keys)
    vals = [float(v) for k, v in walls.items() if isinstance(k, int) and k in wanted] if isinstance(walls, dict) else []
    return float(np.mean(vals)) if vals else None
