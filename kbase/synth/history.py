"""Stores with a history: many commits of one workload, with known steps injected, for the report.

- ``generate_history``: a real git repository with ``commits`` commits, a generated Nsight Systems
  export per commit (its own noise seed) and a baseline of each stored with ``kbase.store.snapshot``
  at its commit, exactly as CI would. ``InjectedStep``s change one kernel's per-launch time from a
  commit on (cumulative): the answer a change-point detector or the report's step markers must find;
  ``HistorySpec.changes`` change the capture itself from a commit on (a GPU model, the kernel mix).
  50 commits of a 2-GPU, 6-step capture take about 20 s.
- ``write_bulk_history``: ``n`` baselines written straight into the store's tables in a few bulk
  inserts (no profile, no git): ~100 baselines of 500 kernels a second, for scale checks of readers of
  the store. It writes what ``kbase.store.save_leaderboard`` writes, from a small synthetic kernel mix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from kbase.synth.generate import ExportSpec, KernelSpec, default_kernel_mix, generate_export

if TYPE_CHECKING:
    from kbase.store.codec.kernel_blobs import StoredTable

_T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class InjectedStep:
    at: int  # index of the first commit that has it
    kernel: str  # a KernelSpec.name of the mix
    factor: float  # per-launch time multiplier from commit ``at`` on
    subject: str  # the commit message of commit ``at``


def _kernel(prefix: str) -> str:
    return next(k.name for k in default_kernel_mix() if k.name.startswith(prefix))


def default_steps() -> list[InjectedStep]:
    """Two steps over 50 commits: attention backward 20% faster at 17, a GEMM 30% slower at 34."""
    return [
        InjectedStep(17, _kernel("void flash::flash_bwd"), 0.80, "attention: fused backward kernel (faster)"),
        InjectedStep(34, _kernel("nvjet_hsh_256x128"), 1.30, "gemm: switch tile config to 256x128 (slower)"),
    ]


@dataclass
class HistorySpec:
    commits: int = 50
    steps: list[InjectedStep] = field(default_factory=default_steps)
    n_gpus: int = 2
    iterations: int = 6
    workload: str = "train"
    branch: str = "main"
    extra_kernels: list[KernelSpec] = field(default_factory=list)  # added to the default mix
    spacing: timedelta = timedelta(hours=6)
    markers: bool = True  # False: exports without NVTX step markers (compared per window-second)
    # ``ExportSpec`` fields set from a commit on (index -> fields; later entries win): another GPU model,
    # kernels dropped or added (an algorithm swap), as such a commit would capture them
    changes: dict[int, dict[str, Any]] = field(default_factory=dict)


@dataclass
class History:
    root: Path
    repo: Path
    db_url: str
    workload: str
    commits: list[str]  # full hashes, oldest first
    subjects: list[str]
    steps: list[InjectedStep]
    baseline_ids: list[int]


def generate_history(root: Path, spec: HistorySpec | None = None) -> History:
    """Create ``root/repo`` (git), ``root/exports/*.sqlite`` and the store ``root/kbase.db``."""
    import git

    import kbase
    from kbase.store import open_store

    spec = spec or HistorySpec()
    root.mkdir(parents=True, exist_ok=True)
    repo_dir = root / "repo"
    repo = git.Repo.init(repo_dir, initial_branch=spec.branch)
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "kbase history")
        cw.set_value("user", "email", "history@kbase.invalid")
    actor = git.Actor("kbase history", "history@kbase.invalid")
    exports = root / "exports"
    exports.mkdir(exist_ok=True)
    mix = default_kernel_mix() + list(spec.extra_kernels)
    db_url = f"sqlite:///{root / 'kbase.db'}"
    settings = kbase.Settings.load(repo=repo_dir, db=db_url, name=spec.workload)
    opened = open_store(settings)
    by_index = {s.at: s for s in spec.steps}
    commits, subjects, ids = [], [], []
    try:
        for i in range(spec.commits):
            step = by_index.get(i)
            subject = step.subject if step else f"train: housekeeping change {i}"
            src = repo_dir / "train.py"
            src.write_text(f"# revision {i}\nmodel = build(step={i})\n")
            repo.index.add([str(src)])
            when = f"{int((_T0 + i * spec.spacing).timestamp())} +0000"  # git internal date format
            sha = repo.index.commit(f"{subject}\n\nGenerated commit {i} of {spec.commits}.", author=actor,
                                    committer=actor, author_date=when, commit_date=when).hexsha
            slowdown: dict[str, float] = {}
            for s in spec.steps:
                if s.at <= i:
                    slowdown[s.kernel] = slowdown.get(s.kernel, 1.0) * s.factor
            changed: dict[str, Any] = {}
            for at in sorted(c for c in spec.changes if c <= i):
                changed.update(spec.changes[at])
            for k, factor in changed.pop("slowdown", {}).items():  # on top of the injected steps'
                slowdown[k] = slowdown.get(k, 1.0) * factor
            path = exports / f"c{i:03d}.sqlite"
            generate_export(path, ExportSpec(n_gpus=spec.n_gpus, iterations=spec.iterations, kernels=mix,
                                             seed=1000 + i, slowdown=slowdown, nvtx=spec.markers, **changed),
                            overwrite=True)
            res = kbase.snapshot(path, settings, rev=sha, store=opened)
            commits.append(sha)
            subjects.append(subject)
            assert res.baseline.id is not None  # stored rows have ids
            ids.append(res.baseline.id)
    finally:
        opened.close()
    return History(root=root, repo=repo_dir, db_url=db_url, workload=spec.workload, commits=commits,
                   subjects=subjects, steps=list(spec.steps), baseline_ids=ids)


# ---------------------------------------------------------------------------------------- bulk


def _bulk_mix(n_kernels: int) -> list[KernelSpec]:
    base = default_kernel_mix()
    out = list(base[:n_kernels])
    i = 0
    while len(out) < n_kernels:  # more kernels than the mix: numbered elementwise variants
        out.append(KernelSpec(f"void bulk_elementwise_kernel_{i}<float>(int, T1)", f"bulk_elementwise_kernel_{i}",
                              5_000 + 97 * i, 8))
        i += 1
    return out


def write_bulk_history(engine, n_baselines: int, *, workload: str = "bulk", n_kernels: int = 30,
                       iterations: int = 10, gpus: int = 8, steps: Sequence[InjectedStep] = (), seed: int = 0,
                       chunk: int = 200, blob_pool: int = 0, op_split: float = 0.2) -> list[str]:
    """Write ``n_baselines`` baselines (one per commit, synthetic hashes) in bulk; returns the commits.

    ``steps`` apply as in ``generate_history`` (``at`` counts baselines). Each baseline is stored as
    ``save_leaderboard`` stores a snapshot: its summary (window, GPUs, iteration keys: what the diff
    compares per iteration), per-iteration samples (summed over GPUs) and launch sketches.

    ``blob_pool`` > 0: the samples, sketches and ops blobs of baseline ``b`` are those of baseline
    ``b % blob_pool`` (each baseline's own leaderboard columns still): encoding them costs ~30 ms a
    500-kernel baseline, and a store for reads that never decode them (``kbase steps``, ``history``,
    ``list``) needs only their sizes. 0: every baseline its own.

    Each kernel's time by op is stored as a snapshot of a profile with op ranges stores it (``op_blobs``):
    the kernels are launched by ``n_kernels // 5`` ops, and a fraction ``op_split`` of them (every
    ``1 / op_split``-th: elementwise kernels serve several ops) by two or three ops, their launches and
    per-iteration time split unevenly between those; ``op_split`` < 0: no op information.
    """
    from kbase.analysis import classify
    from kbase.analysis.window import WindowSpec
    from kbase.store.codec.codec import fingerprint
    from kbase.store.engine import write_transaction
    from kbase.store.schema.models import BASELINE, Baseline
    from kbase.store.write.queries import write_kernels
    from kbase.version import __version__

    mix = _bulk_mix(n_kernels)
    names = [k.name for k in mix]
    cats = [classify.category(n) for n in names]
    mean = np.array([k.mean_ns for k in mix], float)
    launches = np.array([max(k.launches_per_iter, 1) for k in mix], float)
    factors = np.ones((n_baselines, n_kernels))
    for s in steps:
        factors[s.at:, names.index(s.kernel)] *= s.factor
    rng = np.random.default_rng(seed)
    wkey = WindowSpec().key()
    models = "NVIDIA H100 80GB HBM3"
    fp = fingerprint(models, gpus, workload, wkey)
    keys = list(range(2, 2 + iterations))
    commits = [hashlib.sha1(f"{workload}-{seed}-{b}".encode()).hexdigest() for b in range(n_baselines)]
    naming = [(n, classify.family_key(n), classify.short_name(n, k.short_name), c, classify.tensor_core_state(n)[0])
              for n, k, c in zip(names, mix, cats)]
    bt = BASELINE
    with write_transaction(engine) as conn:
        from sqlalchemy import select

        first_id = (conn.execute(select(bt.c.id).order_by(bt.c.id.desc()).limit(1)).scalar() or 0) + 1
        plan = _bulk_op_plan(n_kernels, op_split)
        op_rng = np.random.default_rng([seed, 27])  # its own stream: the baselines' numbers do not depend on it
        pool: list[StoredTable] = []
        for lo in range(0, n_baselines, chunk):
            hi = min(lo + chunk, n_baselines)
            base_rows, kernel_rows = [], []
            for b in range(lo, hi):
                # per-iteration time summed over GPUs: launches x mean x step factor x 1% noise
                jitter = 1 + 0.01 * rng.standard_normal((n_kernels, iterations))
                per = (launches * gpus * mean * factors[b])[:, None] * jitter
                cnt = np.repeat((launches * gpus)[:, None], iterations, axis=1)
                per = np.rint(per).astype(np.float32).astype(np.float64)  # whole ns, as float32 held them
                total = per.sum(axis=1)
                kernel_ns = float(total.sum())
                window_ns = int(kernel_ns / gpus / 0.9)
                by_cat = {c: float(total[[x == c for x in cats]].sum()) for c in ("compute", "communication", "memory")}
                when = _T0 + timedelta(hours=b)
                summary = _bulk_summary(total, by_cat, window_ns, gpus, models, keys, int(cnt.sum()))
                sketches = _bulk_sketches(rng, total, cnt.sum(axis=1), mean * factors[b])
                base_rows.append(Baseline(
                    id=first_id + b, created_at=when, workload=workload, commit=commits[b], commit_date=when,
                    branch="main", source_name="train.sqlite",
                    source_sha256=hashlib.sha256(commits[b].encode()).hexdigest(),
                    source_size=1, source_format="nsys-sqlite", gpu_models=models, gpu_count=gpus, window_spec=wkey,
                    window_desc=f"iterations 2..{1 + iterations}", marker="ProfilerStep#N", aligned=True,
                    warmup_skipped=1, iterations_used=iterations, iteration_keys=json.dumps(keys), window_ns=window_ns,
                    window_gpu_ns=window_ns * gpus, total_kernel_ns=int(kernel_ns), compute_ns=int(by_cat["compute"]),
                    communication_ns=int(by_cat["communication"]), memory_ns=int(by_cat["memory"]), fingerprint=fp,
                    summary_json=summary, kbase_version=__version__).model_dump())
                table = _bulk_kernels(naming, total, per, cnt, sketches, window_ns, gpus, iterations,
                                      pool[b % blob_pool] if blob_pool and b >= blob_pool else None, plan, op_rng)
                if blob_pool and b < blob_pool:
                    pool.append(table)
                kernel_rows.append((first_id + b, table))
            conn.execute(bt.insert(), base_rows)
            write_kernels(conn, workload, kernel_rows)
        if conn.dialect.name == "postgresql":  # the ids were given: the next snapshot's must come after them
            from sqlalchemy import text

            conn.execute(text("SELECT setval(pg_get_serial_sequence('baseline', 'id'), max(id)) FROM baseline"))
    return commits


def _bulk_op_plan(n_kernels: int, op_split: float) -> list[list[tuple[str, str]]] | None:
    """The ops ((key, op) each) launching each kernel of a bulk baseline; None: no ops."""
    if op_split < 0:
        return None
    n_ops = max(n_kernels // 5, 1)
    keys = [(f"Layer{i % 7}/aten::op{i}", f"aten::op{i}") for i in range(n_ops)]
    every = round(1 / op_split) if op_split > 0 else 0
    return [[keys[(k + j * 7) % n_ops] for j in range(2 + k % 2 if every and k % every == 0 else 1)]
            for k in range(n_kernels)]


def _bulk_ops(plan: list[list[int]], order: np.ndarray, per: np.ndarray, cnt: np.ndarray,
              rng: np.random.Generator) -> tuple[Any, np.ndarray, np.ndarray]:
    """(pairs, kernel rows, op positions) of one bulk baseline's kernel time by op: a kernel launched by several ops
    has its launches and per-iteration ns split unevenly between them (whole launches and ns, summing to the
    kernel's)."""
    from types import SimpleNamespace

    from kbase.analysis.sparse import SparseRows

    row_of = np.empty(len(order), dtype=np.int64)
    row_of[order] = np.arange(len(order))
    rows, ops, counts, totals, samples = [], [], [], [], []
    for k, op_list in enumerate(plan):
        if len(op_list) == 1:
            parts_ns, parts_cnt = [per[k]], [cnt[k]]
        else:
            w = rng.dirichlet(np.full(len(op_list), 4.0))
            c_total = cnt[k].sum()
            c_parts = np.floor(w[:-1] * c_total)
            parts_cnt = [np.full(cnt.shape[1], c / cnt.shape[1]) for c in c_parts]
            parts_cnt.append(cnt[k] - np.sum(parts_cnt, axis=0))
            ns_parts = [np.rint(per[k] * x * (1 + 0.01 * rng.standard_normal(per.shape[1]))) for x in w[:-1]]
            parts_ns = [*ns_parts, per[k] - np.sum(ns_parts, axis=0)]
        for op_id, ns, c in zip(op_list, parts_ns, parts_cnt):
            rows.append(row_of[k])
            ops.append(op_id)
            counts.append(int(round(float(np.sum(c)))))
            totals.append(float(np.sum(ns)))
            samples.append(ns)
    pairs = SimpleNamespace(count=np.array(counts, dtype=np.int64), total_ns=np.array(totals),
                            iter_ns=SparseRows.from_dense(np.array(samples, dtype=np.float64).reshape(len(rows),
                                                                                                      per.shape[1])))
    return pairs, np.array(rows, dtype=np.int64), np.array(ops, dtype=np.int64)


def _bulk_kernels(naming: Sequence[tuple[str, str, str, str, str]], total: np.ndarray, per: np.ndarray, cnt: np.ndarray,
                  sketches: np.ndarray, window_ns: int, gpus: int, iterations: int,
                  reuse: StoredTable | None = None, plan: list[list[tuple[str, str]]] | None = None,
                  rng: np.random.Generator | None = None) -> StoredTable:
    """One bulk baseline's kernel data (what the one writer stores): its columns derived as
    ``build_leaderboard`` derives them (whole-ns totals and medians, shares of the window's GPU time), in rank
    order, encoded; ``reuse``: a table whose samples, sketches and ops to store instead of encoding this
    baseline's own; ``plan``: the ops of each kernel (``_bulk_op_plan``), for its ``ops`` blob."""
    from kbase.store.codec.kernel_blobs import Blobs, KernelTable, StoredTable, encode
    from kbase.store.codec.op_blobs import encode_ops

    order = np.argsort(-total, kind="stable")
    units = iterations * gpus
    tot = np.rint(total[order]).astype(np.int64)
    count = cnt.sum(axis=1)[order].astype(np.int64)
    avg = tot / count
    share = tot / (window_ns * gpus)
    with np.errstate(divide="ignore"):
        amdahl = np.where(share < 1, 1.0 / (1.0 - share + 0.0), np.nan)
    t = KernelTable(name_id=order.astype(np.int64), count=count, total_ns=tot, avg_ns=avg,
                    per_iter_ns=tot / units, share_window=share, gpus=np.full(len(tot), gpus, dtype=np.int64),
                    median_ns=np.rint(avg), min_ns=(avg * 0.9).astype(np.int64), max_ns=(avg * 1.1).astype(np.int64),
                    std_ns=avg * 0.02, count_per_iter=count / units, share_kernel=tot / int(tot.sum()),
                    amdahl_ceiling=amdahl, fragmented=np.zeros(len(tot), dtype=bool))
    if reuse is None:
        t.iter_ns, t.iter_count, t.sketches = per[order], cnt[order].astype(np.float64), sketches[order]
    blobs = encode(t)
    names = [naming[k] for k in order.tolist()]
    if reuse is not None:
        return StoredTable(Blobs(blobs.levels, blobs.board, reuse.blobs.samples, reuse.blobs.sketches), reuse.ops,
                           names, reuse.op_names)
    ops, op_names = None, []
    if plan is not None:
        op_names = sorted({o for ops_of in plan for o in ops_of})
        at = {key: i + 1 for i, (key, _) in enumerate(op_names)}
        positions = [[at[key] for key, _ in ops_of] for ops_of in plan]
        pairs, rows, op_pos = _bulk_ops(positions, order, per, cnt, rng or np.random.default_rng(len(tot)))
        ops = encode_ops(pairs, rows, op_pos, t.count, t.total_ns, per[order].astype(np.float32).astype(np.float64))
    return StoredTable(blobs, ops, names, op_names)


def _bulk_summary(total: np.ndarray, by_cat: dict[str, float], window_ns: int, gpus: int, models: str,
                  keys: list[int], launches: int) -> str:
    """The stored summary JSON of one bulk baseline, as ``codec`` writes a snapshot's."""
    from kbase import jsonable
    from kbase.analysis.summary import LeaderboardSummary
    from kbase.enums import WindowMode

    kernel_ns, gpu_ns, n = float(total.sum()), window_ns * gpus, len(keys)
    shares = np.sort(total)[::-1] / kernel_ns if kernel_ns else np.zeros(0)
    s = LeaderboardSummary(
        source="train.sqlite", format="nsys-sqlite", exporter="synthetic", gpu_models=[models], gpus=gpus,
        window=f"iterations {keys[0]}..{keys[-1]}" if keys else "", aligned=True, mode=WindowMode.ITERATIONS.value,
        marker="ProfilerStep#N", iterations=n, iteration_keys=keys, warmup_skipped=1, window_start_ns=0,
        window_end_ns=window_ns, window_ns=window_ns, window_gpu_ns=gpu_ns, total_kernel_ns=int(kernel_ns),
        kernel_ns_per_iter=kernel_ns / (n * gpus) if n else None, compute_ns=int(by_cat["compute"]),
        communication_ns=int(by_cat["communication"]), memory_ns=int(by_cat["memory"]),
        busy_share=kernel_ns / gpu_ns, compute_share=by_cat["compute"] / gpu_ns,
        communication_share=by_cat["communication"] / gpu_ns, memory_share=by_cat["memory"] / gpu_ns,
        share_denominator=f"window {window_ns / 1e9:.6f} s x {gpus} GPU(s) = {gpu_ns / 1e9:.6f} GPU-s",
        top1_share_kernel=float(shares[0]) if len(shares) else 0.0, top5_share_kernel=float(shares[:5].sum()),
        shape=["balanced"], kernels=len(total), launches=launches, unattributed_no_launch=0, outside_iterations=0,
        step_wall_ns=window_ns / n if n else None)
    return json.dumps(jsonable.clean({**jsonable.clean(s), "notes": []}), allow_nan=False)


def _bulk_sketches(rng: np.random.Generator, total: np.ndarray, launches: np.ndarray,
                   mean_ns: np.ndarray) -> np.ndarray:
    """(kernels, CHUNKS, WIDTH) launch sketches: each chunk's launch durations (whole ns) spread 2% around
    the kernel's mean with 0.5% chunk-to-chunk jitter; launches split by launch order as
    ``analysis.sketch`` splits them, time in proportion."""
    from statistics import NormalDist

    from kbase.analysis import sketch

    z = np.array([NormalDist().inv_cdf(q) for q in sketch.QPOS])
    level = mean_ns[:, None] * (1 + 0.005 * rng.standard_normal((len(total), sketch.CHUNKS)))
    n = launches.astype(np.int64)
    edges = -((-np.arange(sketch.CHUNKS + 1)[None, :] * n[:, None]) // sketch.CHUNKS)
    counts = np.diff(edges, axis=1)
    out = np.empty((len(total), sketch.CHUNKS, sketch.WIDTH))
    out[:, :, : sketch.QUANTILES] = np.rint(level[:, :, None] * (1 + 0.02 * z)[None, None, :])
    out[:, :, sketch.COUNT] = counts
    out[:, :, sketch.TOTAL] = np.rint(total[:, None] * counts / np.maximum(n, 1)[:, None])
    return out.astype(np.float32).astype(np.float64)
