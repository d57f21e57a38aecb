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

from kbase import classify
from kbase.window import Window

# Shape thresholds (of total kernel time).
DOMINANT_SHARE = 0.50
HEAVY_SHARE = 0.30
FLAT_TOP5 = 0.40
# Fragmented: very many launches of a tiny kernel — a fusion problem, not a heavyweight.
FRAGMENTED_AVG_NS = 10_000
FRAGMENTED_PER_ITER = 500
FRAGMENTED_COUNT = 10_000

COLUMNS = [
    "name", "short_name", "family", "category", "tc", "gpus", "count", "total_ns", "avg_ns",
    "median_ns", "min_ns", "max_ns", "std_ns", "per_iter_ns", "count_per_iter", "share_window",
    "share_kernel", "amdahl_ceiling", "fragmented",
]


@dataclass
class Leaderboard:
    table: pd.DataFrame  # COLUMNS (plus "gpu" first in a per-GPU view), sorted by total_ns desc
    summary: dict
    samples: pd.DataFrame  # name, iteration, count, total_ns (summed over GPUs)
    notes: list[str] = field(default_factory=list)


def amdahl(p: float, s: float = float("inf")) -> float:
    """Whole-run speed-up when a part with share p runs s× faster."""
    if p >= 1:
        return float("inf")
    return 1.0 / (1.0 - p + (p / s if s != float("inf") else 0.0))


def _aggregate(k: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    g = k.groupby(by, observed=True, sort=False)["dur"]
    agg = g.agg(["count", "sum", "mean", "median", "min", "max", "std"])
    agg.columns = ["count", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns", "std_ns"]
    agg["std_ns"] = agg["std_ns"].fillna(0.0)
    agg["gpus"] = k.groupby(by, observed=True, sort=False)["gpu"].nunique()
    return agg.reset_index()


def build_leaderboard(window: Window, per_gpu: bool = False) -> Leaderboard:
    k = window.kernels
    k = k.assign(dur=(k["end"] - k["start"]).astype("int64"))
    by = ["gpu", "name"] if per_gpu else ["name"]
    t = _aggregate(k, by)
    t["name"] = t["name"].astype(str)
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
    total_kernel = int(k["dur"].sum())
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

    samples = (
        k[k["iteration"] >= 0]
        .groupby(["name", "iteration"], observed=True)["dur"]
        .agg(["count", "sum"])
        .reset_index()
        .rename(columns={"sum": "total_ns"})
    )
    samples["name"] = samples["name"].astype(str)
    summary = _summary(window, t if not per_gpu else _aggregate_view(t), total_kernel)
    return Leaderboard(table=table, summary=summary, samples=samples, notes=list(window.notes))


def _aggregate_view(t: pd.DataFrame) -> pd.DataFrame:
    return t.groupby(["name", "category"], as_index=False)["total_ns"].sum().sort_values("total_ns", ascending=False)


def _summary(window: Window, t: pd.DataFrame, total_kernel: int) -> dict:
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
    frag = t[t.get("fragmented", False) == True] if "fragmented" in t else t.iloc[0:0]  # noqa: E712
    if len(frag):
        shape.append(f"fragmented: {len(frag)} kernel(s) with very many tiny launches (fusion candidates)")
    if not shape:
        shape.append("balanced")
    p = window.profile
    n_it = window.n_iterations
    return {
        "source": str(p.source),
        "format": p.format,
        "exporter": p.exporter_version,
        "gpu_models": p.gpu_models,
        "gpus": window.n_gpus,
        "window": window.describe(),
        "aligned": window.aligned,
        "mode": window.mode,
        "marker": window.marker,
        "iterations": n_it,
        "iteration_keys": window.iteration_keys,
        "warmup_skipped": window.warmup_skipped,
        "window_start_ns": window.start_ns,
        "window_end_ns": window.end_ns,
        "window_ns": window.length_ns,
        "window_gpu_ns": gpu_ns,
        "total_kernel_ns": total_kernel,
        "kernel_ns_per_iter": (total_kernel / (n_it * window.n_gpus)) if n_it else None,
        "compute_ns": comp,
        "communication_ns": comm,
        "memory_ns": mem,
        "busy_share": total_kernel / gpu_ns if gpu_ns else None,
        "compute_share": comp / gpu_ns if gpu_ns else None,
        "communication_share": comm / gpu_ns if gpu_ns else None,
        "memory_share": mem / gpu_ns if gpu_ns else None,
        "share_denominator": f"window {window.length_ns / 1e9:.6f} s x {window.n_gpus} GPU(s) = {gpu_ns / 1e9:.6f} GPU-s",
        "top1_share_kernel": top1,
        "top5_share_kernel": top5,
        "shape": shape,
        "kernels": int(len(t)),
        "launches": int(len(window.kernels)),
        "unattributed_no_launch": window.no_launch,
        "outside_iterations": window.outside,
    }
