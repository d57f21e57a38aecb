"""Stage 5 — diff two sides (each one or more pooled leaderboards) per aligned iteration.

Everything is per iteration per GPU: a kernel's time per iteration, its launches per iteration and
its time per launch, so two captures of different length still compare. A side whose window is not
iteration-aligned is normalised per second of window instead, and marked "not aligned".

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

from kbase.analysis.leaderboard import amdahl
from kbase.compare.policy import Policy
from kbase.compare.stats import mann_whitney_p, welch_p

DIFF_SCHEMA = "kbase.diff/1"
CLASSES = ("regressed", "improved", "new", "gone", "unchanged", "within noise")
NO_KERNELS = "candidate window holds no kernels"


@dataclass
class Side:
    label: str
    kernels: pd.DataFrame  # index: name
    unit: str  # "iteration" | "window-second"
    n_units: float
    n_gpus: int
    unit_wall_ns: float  # wall time of one unit on one GPU (iteration time)
    totals: dict  # per unit per GPU: kernel, compute, communication, memory
    total_samples: np.ndarray  # kernel time per iteration per GPU, one value per iteration
    aligned: bool
    step_wall_ns: float | None
    meta: dict = field(default_factory=dict)  # workload, gpu_models, gpu_count, window_spec, ids, commit


_TABLE_COLS = ("name", "short_name", "family", "category", "tc", "count", "avg_ns", "std_ns", "total_ns", "gpus")
_TEXT_COLS = ("short_name", "family", "category", "tc")


def side_from_leaderboards(lbs: list, label: str, meta: dict | None = None) -> Side:
    """Pool one or more leaderboards (repeat captures at one commit) into one side."""
    per_kernel: dict[str, dict] = {}
    n_units = 0.0
    gpu_units = 0.0
    wall = 0.0
    totals = {"kernel": 0.0, "compute": 0.0, "communication": 0.0, "memory": 0.0}
    total_samples: list[np.ndarray] = []
    lb_arrays: list[tuple[int, dict[str, np.ndarray]]] = []  # per leaderboard: (iterations, name -> samples)
    aligned = all(lb.summary["aligned"] for lb in lbs)
    steps = [lb.summary.get("step_wall_ns") for lb in lbs if lb.summary.get("step_wall_ns")]
    for lb in lbs:
        s = lb.summary
        gpus = max(int(s["gpus"]), 1)
        keys = [int(k) for k in s["iteration_keys"]] if aligned else []
        units = len(keys) if aligned else s["window_ns"] / 1e9
        n_units += units
        gpu_units += units * gpus
        wall += s["window_ns"]
        for key, col in (("kernel", "total_kernel_ns"), ("compute", "compute_ns"),
                         ("communication", "communication_ns"), ("memory", "memory_ns")):
            totals[key] += float(s[col])
        pos = {k: i for i, k in enumerate(keys)}
        iter_arr: dict[str, np.ndarray] = {}
        if keys and len(lb.samples):
            smp = lb.samples[lb.samples["iteration"].isin(pos)]
            codes, names = pd.factorize(smp["name"])
            mat = np.zeros((len(names), len(keys)))
            mat[codes, smp["iteration"].map(pos).to_numpy(dtype=np.int64)] = smp["total_ns"].to_numpy() / gpus
            iter_arr = dict(zip(names, mat))
        if keys:
            total_samples.append(np.sum(list(iter_arr.values()), axis=0) if iter_arr else np.zeros(len(keys)))
            lb_arrays.append((len(keys), iter_arr))
        t = lb.table  # column lists: itertuples over Arrow-backed string columns is ~3x slower
        for name, short, fam, cat, tc, cnt, avg, sd, tot, g in zip(*(t[c].tolist() for c in _TABLE_COLS)):
            d = per_kernel.setdefault(name, {"short_name": short, "family": fam, "category": cat,
                                             "tc": tc, "count": 0, "total_ns": 0.0, "sumsq": 0.0, "gpus": 0})
            n, mean, std = int(cnt), float(avg), float(sd)
            d["count"] += n
            d["total_ns"] += float(tot)
            d["sumsq"] += (n - 1) * std * std + n * mean * mean  # Σx² of this part
            d["gpus"] = max(d["gpus"], int(g))
    rows = []
    for name, d in per_kernel.items():
        n = d["count"]
        mean = d["total_ns"] / n if n else 0.0
        var = (d["sumsq"] - n * mean * mean) / (n - 1) if n > 1 else 0.0
        rows.append({
            "name": name, "short_name": d["short_name"], "family": d["family"], "category": d["category"],
            "tc": d["tc"], "gpus": d["gpus"], "count": n, "total_ns": d["total_ns"], "avg_ns": mean,
            "std_ns": float(np.sqrt(max(var, 0.0))),
            "per_unit_ns": d["total_ns"] / gpu_units if gpu_units else np.nan,
            "count_per_unit": n / gpu_units if gpu_units else np.nan,
            # a kernel absent from one repeat capture ran zero ns in each of its iterations
            "samples": np.concatenate([arrs.get(name, np.zeros(n)) for n, arrs in lb_arrays]) if lb_arrays else np.empty(0),
        })
    if rows:
        kernels = pd.DataFrame(rows).set_index("name")
        # Text columns and the name index as plain object arrays: compute_diff reads one row per
        # kernel with .loc, and scalars out of Arrow-backed string columns made that ~40% slower.
        kernels = kernels.astype({c: object for c in _TEXT_COLS})
        kernels.index = kernels.index.astype(object)
    else:
        kernels = pd.DataFrame(columns=["short_name", "family", "category", "tc", "gpus", "count", "total_ns",
                                        "avg_ns", "std_ns", "per_unit_ns", "count_per_unit", "samples"])
    n_gpus = int(lbs[0].summary["gpus"]) if lbs else 0
    return Side(
        label=label, kernels=kernels, unit="iteration" if aligned else "window-second", n_units=n_units,
        n_gpus=n_gpus, unit_wall_ns=wall / n_units if n_units else np.nan,
        totals={k: v / gpu_units if gpu_units else np.nan for k, v in totals.items()},
        total_samples=np.concatenate(total_samples) if total_samples else np.empty(0),
        aligned=aligned, step_wall_ns=float(np.mean(steps)) if steps else None, meta=meta or {},
    )


@dataclass
class DiffResult:
    before: Side
    after: Side
    rows: pd.DataFrame
    totals: dict
    mismatches: list[str]
    policy: Policy
    notes: list[str] = field(default_factory=list)


def comparability(before: Side, after: Side, policy: Policy) -> list[str]:
    """Reasons the two sides do not measure the same thing (empty: comparable)."""
    out = []
    for key, what in (("workload", "workload"), ("gpu_models", "GPU model"), ("gpu_count", "GPU count"),
                      ("window_spec", "window spec")):
        a, b = before.meta.get(key), after.meta.get(key)
        if a is not None and b is not None and a != b:
            out.append(f"{what} differs: {a} vs {b}")
    if before.aligned != after.aligned:
        # per iteration on one side, per second of window on the other: no common unit
        out.append(f"iteration alignment differs: {before.unit} vs {after.unit} (one side has no iteration marker)")
    if after.kernels.empty or after.totals.get("kernel", 0) == 0:
        out.append(NO_KERNELS)
    elif before.aligned and after.aligned and after.n_units < policy.min_iteration_ratio * before.n_units:
        out.append(f"candidate has far fewer iterations ({after.n_units:g}) than the baseline ({before.n_units:g})")
    return out


def _significance(b: pd.Series, a: pd.Series, policy: Policy) -> tuple[float, str, bool]:
    """(p-value, test used, enough data?) for one matched kernel."""
    ps, tests = [], []
    sb, sa = b["samples"], a["samples"]
    if len(sb) >= policy.min_iterations and len(sa) >= policy.min_iterations:
        ps.append(mann_whitney_p(sb, sa))
        tests.append("mann-whitney(iterations)")
    if b["count"] >= policy.min_launches and a["count"] >= policy.min_launches:
        ps.append(welch_p(b["count"], b["avg_ns"], b["std_ns"], a["count"], a["avg_ns"], a["std_ns"]))
        tests.append("welch(launches)")
    if not ps:
        return 1.0, "none", False
    return min(1.0, min(ps) * len(ps)), "+".join(tests), True


def _classify(row: dict, policy: Policy) -> tuple[str, str]:
    """(class, confidence) of a matched kernel."""
    pol = policy.for_kernel(row["name"], row["short_name"])
    pct = row["delta_pct"]
    if abs(pct) < pol.unchanged_pct:
        return "unchanged", "ok" if row["enough"] else "low"
    big = abs(pct) >= pol.max_increase_pct
    floor = abs(row["delta_ns"]) >= pol.abs_floor_us * 1e3
    share = max(row["share_before"], row["share_after"]) >= pol.share_floor
    significant = row["p_value"] < pol.alpha
    if big and floor and share and row["enough"] and significant:
        return ("regressed" if pct > 0 else "improved"), "ok"
    return "within noise", "ok" if row["enough"] else "low"


def _diagnosis(row: dict) -> str:
    if row["class"] in ("new", "gone"):
        return row["class"]
    dc = row["count_after"] - row["count_before"]
    rel_count = dc / row["count_before"] if row["count_before"] else 0.0
    rel_avg = (row["avg_after"] - row["avg_before"]) / row["avg_before"] if row["avg_before"] else 0.0
    parts = []
    if abs(rel_count) >= 0.01 and abs(dc) >= 0.5:
        parts.append(f"{'more' if dc > 0 else 'fewer'} launches ({dc:+.1f}/iter)")
    if abs(rel_avg) >= 0.01:
        parts.append(f"{'slower' if rel_avg > 0 else 'faster'} per launch ({rel_avg:+.1%})")
    return "; ".join(parts) or "no change in launches or per-launch time"


def _amdahl_text(row: dict, unit_wall: float) -> str:
    """What this change is worth overall, in Amdahl terms."""
    p = row["share_before"]
    if row["class"] == "new":
        return f"adds {row['effect']:.2%} of the iteration"
    if row["class"] == "gone":
        return f"removes {-row['effect']:.2%} of the iteration"
    if row["before"] <= 0 or row["after"] <= 0:
        return ""
    speed = row["before"] / row["after"]  # >1: faster
    overall = amdahl(p, speed)
    if speed < 1:
        return f"{1 / speed:.2f}x slower kernel at {p:.1%} share: run {overall:.4f}x ({1 - overall:.2%} slower); fixing it is worth {1 / overall:.4f}x"
    return f"{speed:.2f}x faster kernel at {p:.1%} share: run {overall:.4f}x; ceiling {amdahl(p):.3f}x"


LIBRARY_PICKED = ("tc", "fallback")  # matmul/convolution kernels: cuBLAS/cuDNN choose among many


def _mark_algorithm_swaps(df: pd.DataFrame, policy: Policy) -> list[str]:
    """Library algorithm swaps are not kernel regressions.

    cuDNN/cuBLAS pick a kernel per call from many candidates (autotuning, heuristics); between two
    runs work moves between matmul/convolution kernels: launch counts change, kernels appear and
    vanish, and per-launch averages shift with the mix of shapes. When the launch-count-driven
    changes among those kernels (plus the new and gone ones) net out below ``max_increase_pct`` of
    their combined time, they are one swap: each row keeps its numbers and says so, and none of
    them fails the gate on its own — the total-time rule still applies.
    """
    lib = df["tc_before"].isin(LIBRARY_PICKED) | df["tc_after"].isin(LIBRARY_PICKED)
    count_moved = (df["delta_count"].abs() >= 0.5) & (
        df["delta_count"].abs() >= 0.01 * df[["count_before", "count_after"]].max(axis=1))
    moved = lib & (count_moved | df["class"].isin(["new", "gone"]))
    df["swap"] = False
    if moved.sum() < 2:
        return []
    net = float(df.loc[moved, "delta_ns"].sum())
    base = float(df.loc[lib, "before"].sum())
    if not base or abs(net) / base * 100 >= policy.max_increase_pct:
        return []
    df.loc[moved, "swap"] = True
    df.loc[moved, "gated"] = False
    df.loc[moved, "diagnosis"] = "algorithm swap: " + df.loc[moved, "diagnosis"]
    return [f"algorithm swap: {int(moved.sum())} matmul/convolution kernels changed launch counts or appeared/"
            f"vanished, netting {net / base:+.1%} of matmul/convolution time ({net / 1e3:+.1f} µs per iteration); "
            "not gated per kernel (cuDNN/cuBLAS picked other algorithms)"]


def match_kernels(bk: pd.DataFrame, ak: pd.DataFrame) -> list[tuple[str | None, str | None, str]]:
    """Pairs (before name, after name, how): by full name, then by family key where unique."""
    pairs = []
    common = [n for n in bk.index if n in ak.index]
    pairs += [(n, n, "name") for n in common]
    rest_b = [n for n in bk.index if n not in ak.index]
    rest_a = [n for n in ak.index if n not in bk.index]
    fam_b: dict[str, list[str]] = {}
    fam_a: dict[str, list[str]] = {}
    for n in rest_b:
        fam_b.setdefault(bk.at[n, "family"], []).append(n)
    for n in rest_a:
        fam_a.setdefault(ak.at[n, "family"], []).append(n)
    used_b, used_a = set(), set()
    for fam, bs in fam_b.items():
        as_ = fam_a.get(fam, [])
        if len(bs) == 1 and len(as_) == 1:
            pairs.append((bs[0], as_[0], "family"))
            used_b.add(bs[0])
            used_a.add(as_[0])
    pairs += [(n, None, "gone") for n in rest_b if n not in used_b]
    pairs += [(None, n, "new") for n in rest_a if n not in used_a]
    return pairs


def compute_diff(before: Side, after: Side, policy: Policy | None = None) -> DiffResult:
    policy = policy or Policy()
    bk, ak = before.kernels, after.kernels
    wall = before.unit_wall_ns if before.unit_wall_ns and before.unit_wall_ns == before.unit_wall_ns else np.nan
    wall_after = after.unit_wall_ns
    rows = []
    for bn, an, how in match_kernels(bk, ak):
        b = bk.loc[bn] if bn is not None else None
        a = ak.loc[an] if an is not None else None
        ref = a if a is not None else b
        before_ns = float(b["per_unit_ns"]) if b is not None else 0.0
        after_ns = float(a["per_unit_ns"]) if a is not None else 0.0
        row = {
            "name": an if an is not None else bn, "name_before": bn, "match": how,
            "short_name": ref["short_name"], "family": ref["family"], "category": ref["category"],
            "tc_before": b["tc"] if b is not None else None, "tc_after": a["tc"] if a is not None else None,
            "before": before_ns, "after": after_ns, "delta_ns": after_ns - before_ns,
            "delta_pct": (after_ns - before_ns) / before_ns * 100 if before_ns else np.inf,
            "count_before": float(b["count_per_unit"]) if b is not None else 0.0,
            "count_after": float(a["count_per_unit"]) if a is not None else 0.0,
            "avg_before": float(b["avg_ns"]) if b is not None else np.nan,
            "avg_after": float(a["avg_ns"]) if a is not None else np.nan,
            "share_before": before_ns / wall if wall else np.nan,
            "share_after": after_ns / wall_after if wall_after else np.nan,
            "effect": (after_ns - before_ns) / wall if wall else np.nan,
        }
        row["delta_count"] = row["count_after"] - row["count_before"]
        row["delta_avg_pct"] = ((row["avg_after"] - row["avg_before"]) / row["avg_before"] * 100
                                if b is not None and a is not None and row["avg_before"] else np.nan)
        pol = policy.for_kernel(row["name"], row["short_name"])
        row["ignored"] = policy.ignored(row["name"], row["short_name"])
        if b is None or a is None:
            row.update(p_value=np.nan, test="none", enough=False, confidence="ok")
            row["class"] = "new" if b is None else "gone"
            share = row["share_after"] if b is None else row["share_before"]
            row["gated"] = bool(b is None and share >= pol.share_floor and not row["ignored"])
        else:
            p, test, enough = _significance(b, a, policy)
            row.update(p_value=p, test=test, enough=enough)
            row["class"], row["confidence"] = _classify(row, policy)
            row["gated"] = row["class"] == "regressed" and not row["ignored"]
        row["diagnosis"] = _diagnosis(row)
        row["amdahl"] = _amdahl_text(row, wall)
        rows.append(row)
    df = pd.DataFrame(rows)
    notes = []
    if len(df):
        notes += _mark_algorithm_swaps(df, policy)
        df["_reg"] = (df["class"] != "regressed").astype(int)
        df["_abs"] = -df["effect"].abs().fillna(0)
        df = df.sort_values(["_reg", "_abs", "name"], kind="stable").drop(columns=["_reg", "_abs"]).reset_index(drop=True)
    for side in (before, after):
        if not side.aligned:
            notes.append(f"not aligned: {side.label} is not iteration-aligned (compared per window-second)")
    return DiffResult(before=before, after=after, rows=df, totals=_totals(before, after, policy),
                      mismatches=comparability(before, after, policy), policy=policy, notes=notes)


def _totals(before: Side, after: Side, policy: Policy) -> dict:
    out = {"unit": before.unit if before.unit == after.unit else "mixed"}
    for key in ("kernel", "compute", "communication", "memory"):
        b, a = before.totals.get(key, np.nan), after.totals.get(key, np.nan)
        out[key] = {"before": b, "after": a, "delta_ns": a - b, "delta_pct": (a - b) / b * 100 if b else np.nan}
    out["iteration_wall"] = {"before": before.unit_wall_ns, "after": after.unit_wall_ns,
                             "delta_ns": after.unit_wall_ns - before.unit_wall_ns,
                             "delta_pct": (after.unit_wall_ns - before.unit_wall_ns) / before.unit_wall_ns * 100
                             if before.unit_wall_ns else np.nan}
    if before.step_wall_ns and after.step_wall_ns:
        b, a = before.step_wall_ns, after.step_wall_ns
        out["step_wall"] = {"before": b, "after": a, "delta_ns": a - b, "delta_pct": (a - b) / b * 100}
    k = out["kernel"]
    sb, sa = before.total_samples, after.total_samples
    if len(sb) >= policy.min_iterations and len(sa) >= policy.min_iterations:
        p, enough = mann_whitney_p(sb, sa), True
    else:
        p, enough = 1.0, False
    k["p_value"], k["enough"] = p, enough
    k["regressed"] = bool(enough and p < policy.alpha and k["delta_pct"] >= policy.total_increase_pct)
    return out
