"""The kernel leaderboard of a window: one row per kernel, plus a summary and per-iteration samples.

Two share denominators, both always labelled:
- ``share_window``: of the window's GPU time = window length × GPUs (idle time included), the one
  Amdahl's law needs: a kernel with share p sped up s× gives 1/(1−p+p/s), at most 1/(1−p);
- ``share_kernel``: of the total kernel time in the window.
``per_iter_ns`` is the kernel's time per iteration per GPU (total / iterations / GPUs).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from kbase.analysis import classify
from kbase.analysis import columns as registry
from kbase.analysis.amdahl import amdahl  # noqa: F401 - re-exported (its home before)
from kbase.analysis.kernel_stats import Columns, aggregate_kernels
from kbase.analysis.summary import COLUMNS, LeaderboardSummary  # noqa: F401 - re-exported (their home before)
from kbase.analysis.window import Window
from kbase.display import Shown

if TYPE_CHECKING:
    import pandas as pd

    from kbase.analysis.ops import OpColumns, OpPairs

# Shape thresholds (of total kernel time).
DOMINANT_SHARE = 0.50
HEAVY_SHARE = 0.30
FLAT_TOP5 = 0.40
# Fragmented: very many launches of a tiny kernel — a fusion problem, not a heavyweight.
FRAGMENTED_AVG_NS = 10_000
FRAGMENTED_PER_ITER = 500
FRAGMENTED_COUNT = 10_000

SAMPLE_COLUMNS = ["name", "iteration", "count", "total_ns"]



class Leaderboard(Shown):
    """One row per kernel (``table``: COLUMNS, plus "gpu" first in a per-GPU view, sorted by total_ns
    desc), the summary, and per-iteration ``samples`` (name, iteration, count, total_ns summed over GPUs).

    A computed leaderboard holds numpy columns (``column``, ``records``: what the renderers and the
    comparison read, so ``kbase top`` needs no pandas); ``table`` and ``samples`` are the same as
    DataFrames, built on first use. A stored one (``store.codec``) may be given DataFrames directly.
    """

    def __init__(self, table: pd.DataFrame | Columns, summary: LeaderboardSummary,
                 samples: pd.DataFrame | Columns, notes: list[str] | None = None,
                 sketches: dict[str, np.ndarray] | None = None) -> None:
        self._table = table
        self._samples = samples
        self.summary = summary
        self.notes: list[str] = list(notes) if notes is not None else []
        self.sketches: dict[str, np.ndarray] = sketches if sketches is not None else {}  # name -> launch sketch
        self.ops: OpPairs | None = None  # each kernel's launches and time by the op that launched them

    @property
    def table(self) -> pd.DataFrame:
        if isinstance(self._table, dict):
            import pandas as pd

            self._table = pd.DataFrame(self._table, columns=list(self._table))
        return self._table

    @property
    def samples(self) -> pd.DataFrame:
        if isinstance(self._samples, dict):
            import pandas as pd

            cols: dict[str, Any] = dict(self._samples)
            cols["name"] = pd.Series(cols["name"], dtype=object)  # no Arrow copy per sample
            self._samples = pd.DataFrame(cols, columns=SAMPLE_COLUMNS)
        return self._samples

    @property
    def columns(self) -> list[str]:
        return [str(c) for c in (self._table if isinstance(self._table, dict) else self._table.columns)]

    def column(self, name: str) -> np.ndarray:
        """One table column as a numpy array (object for text)."""
        if isinstance(self._table, dict):
            return self._table[name]
        col = self._table[name]
        return col.to_numpy(dtype=object) if col.dtype.kind not in "biuf" else col.to_numpy()

    def sample_column(self, name: str) -> np.ndarray:
        if isinstance(self._samples, dict):
            return self._samples[name]
        col = self._samples[name]
        return col.to_numpy(dtype=object) if name == "name" else col.to_numpy()

    def records(self) -> list[dict[str, Any]]:
        """Rows as dicts of Python scalars (NaN stays NaN)."""
        if not isinstance(self._table, dict):
            return [{str(k): v for k, v in r.items()} for r in self._table.to_dict("records")]
        names = list(self._table)
        values = [self._table[c].tolist() for c in names]
        return [dict(zip(names, row)) for row in zip(*values)]


def declared_columns(cols: Columns) -> Columns:
    """``cols`` in the order ``analysis.columns.LEADERBOARD`` declares, with its ``compute`` columns added (a
    declared column computed nowhere is a clear error, never a missing field)."""
    for name, compute in registry.computed():
        cols[name] = np.asarray(compute(cols))
    missing = [c for c in registry.row_fields() if c not in cols]
    if missing:
        raise KeyError(f"leaderboard columns declared in kbase.analysis.columns but computed nowhere: {missing}")
    return {c: cols[c] for c in registry.row_fields()}


def _texts(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def build_leaderboard(window: Window, per_gpu: bool = False, sorted_keys: np.ndarray | None = None,
                      kinds: list[classify.KernelKind] | None = None, ops: OpColumns | None = None,
                      budget: dict | None = None, samples: bool = True) -> Leaderboard:
    """``sorted_keys``: the window's (name code << 40 | duration) keys in ascending order when already at
    hand (``analysis.sketch.window_sketches_and_keys``), spared a sort of every launch.
    ``kinds``: :func:`classify.kinds_of` the profile's names, when already at hand. ``ops``: each launch's op
    (``analysis.ops.attribute_ops``): the leaderboard then also splits each kernel by op (``Leaderboard.ops``).
    ``budget``: the window's GPU time budget (``budget_of``) when computed already (before the launch columns,
    which tell the idle gaps' causes, were dropped); computed here otherwise. ``samples``: False leaves the
    per-iteration samples empty (``kbase top`` shows none and its cache keeps none: ~4% of its CPU at 1M)."""
    names = window.profile.columns.names
    codes = window.column("name")
    gpu = window.column("gpu")
    dur = window.column("end")
    dur -= window.column("start")
    np.clip(dur, 0, (1 << 40) - 1, out=dur)  # (what group_stats does) before another thread reads dur
    profile = window.profile
    aggregate = functools.partial(aggregate_kernels, codes, gpu, dur, len(names), per_gpu, sorted_keys)
    sampled = _samples if samples else _no_samples
    classified: Callable[[], list[classify.KernelKind]]
    if kinds is not None and len(kinds) == len(names):  # (given for this profile's names)
        classified = functools.partial(list, kinds)
    else:
        classified = functools.partial(classify.kinds_of, names.tolist(), profile.short_names)
    if sorted_keys is None and (kinds is None or len(kinds) != len(names) or samples):
        # The aggregate sorts every launch (numpy: the sort releases the GIL) on a second thread while this one
        # classifies every name (regular expressions, in Python) and sums the per-iteration samples. Not with
        # the keys given (a snapshot): there the two side by side raised a 10M snapshot's peak by ~75 MB
        # (876 -> 952 MiB in a benchmark run), even in one malloc arena. Nor when the names come classified and
        # no samples are asked for (``kbase top``): this thread would only wait, the second one costing CPU.
        from kbase.readers.threads import Pool

        with Pool(1) as pool:
            aggregated = pool.submit(aggregate)
            info, iteration_samples = classified(), sampled(codes, dur, window, names)
            t = aggregated.result()
    else:
        t = aggregate()
        info, iteration_samples = classified(), sampled(codes, dur, window, names)
    row_info = [info[c] for c in t["code"].tolist()]
    n_it = window.n_iterations
    n_gpus = max(window.n_gpus, 1)
    total_kernel = int(dur.sum())
    gpus_per_row = 1 if per_gpu else n_gpus
    total = t["total_ns"]
    if n_it:
        per_iter = total / (n_it * gpus_per_row)
        count_per_iter = t["count"] / (n_it * gpus_per_row)
        many = count_per_iter >= FRAGMENTED_PER_ITER
    else:
        per_iter = np.full(len(total), np.nan)
        count_per_iter = np.full(len(total), np.nan)
        many = t["count"] >= FRAGMENTED_COUNT
    denom = window.length_ns * gpus_per_row if per_gpu else window.gpu_ns
    share_window = total / denom if denom else np.full(len(total), np.nan)
    share_kernel = total / total_kernel if total_kernel else np.full(len(total), np.nan)
    cols: Columns = {
        "name": names[t["code"]],
        "short_name": _texts([r[0] for r in row_info]),
        "family": _texts([r[1] for r in row_info]),
        "category": _texts([r[2] for r in row_info]),
        "tc": _texts([r[3] for r in row_info]),
        "gpus": t["gpus"], "count": t["count"], "total_ns": total, "avg_ns": t["avg_ns"],
        "median_ns": t["median_ns"], "min_ns": t["min_ns"], "max_ns": t["max_ns"], "std_ns": t["std_ns"],
        "per_iter_ns": per_iter, "count_per_iter": count_per_iter,
        "share_window": share_window, "share_kernel": share_kernel,
        "amdahl_ceiling": np.array([amdahl(p) for p in np.nan_to_num(share_window, nan=0.0).tolist()], dtype=float),
        "fragmented": many & (t["avg_ns"] < FRAGMENTED_AVG_NS),
    }
    cols = declared_columns(cols)
    # total desc, then name (codes follow name order), then the aggregate's (GPU) order: a stable sort
    order = np.lexsort((t["code"], -total))
    table = {c: v[order] for c, v in (({"gpu": t["gpu"]} if per_gpu else {}) | cols).items()}

    pairs = None
    notes = list(window.notes)
    if ops is not None and not per_gpu:
        from kbase.analysis.ops import op_pairs

        pairs = op_pairs(ops, codes, ops.code[window.mask], dur, window.column("iteration"),
                         list(window.iteration_keys), names)
    del codes, gpu, dur
    if per_gpu:  # the summary's shape is of kernels, summed over GPUs
        cat, tot = _per_kernel(t["code"], cols["category"], total)
        summary = _summary(window, cat, tot, 0, total_kernel)
    else:
        summary = _summary(window, table["category"], table["total_ns"], int(np.count_nonzero(table["fragmented"])),
                           total_kernel)
    if not per_gpu:
        summary.budget = budget if budget is not None else budget_of(window, info).to_stored()
    lb = Leaderboard(table=table, summary=summary, samples=iteration_samples, notes=notes)
    lb.ops = pairs
    return lb


def budget_of(window: Window, kinds: list[classify.KernelKind], whole: bool = False):
    """The window's GPU time budget (``analysis.budget``), kernels classed by ``kinds`` (one per name code)."""
    from kbase.analysis.budget import category_codes, compute_budget

    return compute_budget(window, category_codes([k[2] for k in kinds]), whole=whole,
                          labels=_texts([k[0] for k in kinds]))


def _samples(codes: np.ndarray, dur: np.ndarray, window: Window, names: np.ndarray) -> Columns:
    """Per (kernel, iteration): launches and total ns summed over GPUs (the diff's samples).
    Chunked bincounts over a (kernel, iteration) code: no full-length temporaries."""
    from kbase.analysis.sparse import column_lookup

    keys = np.asarray(window.iteration_keys, dtype=np.int64)
    it = window.column("iteration")
    n = len(names) * max(len(keys), 1)
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros(n)
    if len(keys):
        column_of = column_lookup(keys)  # (a window's launches are all in its iterations: a table for step numbers)
        for lo in range(0, len(it), 1 << 20):
            sl = slice(lo, lo + (1 << 20))
            its, code, d = it[sl], codes[sl], dur[sl]
            inside = its >= 0
            if not inside.all():
                its, code, d = its[inside], code[inside], d[inside]
            group = code.astype(np.int64)
            group *= len(keys)
            group += column_of(its)
            count += np.bincount(group, minlength=n)
            total += np.bincount(group, weights=d, minlength=n)
    g = np.nonzero(count)[0]
    return {"name": names[g // max(len(keys), 1)],
            "iteration": keys[g % len(keys)] if len(keys) else np.zeros(0, dtype=np.int64),
            "count": count[g], "total_ns": np.rint(total[g]).astype(np.int64)}


def _no_samples(codes: np.ndarray, dur: np.ndarray, window: Window, names: np.ndarray) -> Columns:
    """``_samples``' columns, empty."""
    return {"name": names[:0], "iteration": np.zeros(0, dtype=np.int64), "count": np.zeros(0, dtype=np.int64),
            "total_ns": np.zeros(0, dtype=np.int64)}


def _per_kernel(code: np.ndarray, category: np.ndarray, total: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A per-GPU view's rows summed per kernel: (category, total_ns), by total desc."""
    uniq, inv = np.unique(code, return_inverse=True)
    summed = np.bincount(inv, weights=total, minlength=len(uniq)).astype(np.int64)
    cat = np.empty(len(uniq), dtype=object)
    cat[inv] = category
    order = np.argsort(-summed, kind="stable")
    return cat[order], summed[order]


def _summary(window: Window, category: np.ndarray, total: np.ndarray, n_frag: int,
             total_kernel: int) -> LeaderboardSummary:
    """``category``/``total``: one per kernel, by total desc."""
    by_cat: dict[Any, int] = {}
    for c, v in zip(category.tolist(), total.tolist()):
        by_cat[c] = by_cat.get(c, 0) + int(v)
    comp = by_cat.get(classify.COMPUTE, 0)
    comm = by_cat.get(classify.COMMUNICATION, 0)
    mem = by_cat.get(classify.MEMORY, 0)
    gpu_ns = window.gpu_ns
    shares = (total / total_kernel).tolist() if total_kernel else []
    top1 = shares[0] if shares else 0.0
    top5 = float(sum(shares[:5]))
    shape = []
    if top1 > DOMINANT_SHARE:
        shape.append(f"dominated: one kernel holds {top1:.0%} of kernel time (> 50%)")
    elif top1 > HEAVY_SHARE:
        shape.append(f"heavy top: one kernel holds {top1:.0%} of kernel time (> 30%)")
    if top5 < FLAT_TOP5:
        shape.append(f"flat: top five hold {top5:.0%} of kernel time (< 40%)")
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
        kernels=len(total),
        launches=window.n_launches,
        unattributed_no_launch=window.no_launch,
        outside_iterations=window.outside,
        step_wall_ns=_mean_step_wall(p, window.iteration_keys),
        capture_span=window.span.kind if window.span else None,
        capture_span_why=window.span.why if window.span else None,
    )


def _mean_step_wall(profile, keys: list[int]) -> float | None:
    """Mean CPU wall time of the window's steps, where the reader measured it (Kineto)."""
    walls = profile.extra.get("step_wall_ns") or {}
    wanted = set(keys)
    vals = [float(v) for k, v in walls.items() if isinstance(k, int) and k in wanted] if isinstance(walls, dict) else []
    return float(np.mean(vals)) if vals else None
