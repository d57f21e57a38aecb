"""The store's history as the comparison uses it: run-to-run noise per kernel from past baselines on
a branch's first-parent line, and the step changes of every kernel along that line."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from kbase.comparison.changepoints import KernelStep, kernel_steps
from kbase.comparison.noise import history_noise
from kbase.comparison.setups import SetupChange, changes_note, setup_changes, setup_groups
from kbase.display import Shown

if TYPE_CHECKING:
    import pandas as pd

    from kbase.comparison.resolve import Resolved
    from kbase.gitrepo import CommitNote
    from kbase.policy import Policy
    from kbase.store.reader import StoreReader


def first_parent_line(repo: Path | None, commit: str | None, depth: int) -> list[str] | None:
    """The first-parent line ending at ``commit`` (nearest first), or None without a repository."""
    from kbase.gitrepo import first_parents, open_repo

    if commit is None:
        return None
    try:
        return first_parents(open_repo(repo), commit, limit=depth)
    except Exception:  # noqa: BLE001 - no repository or an unknown commit: fall back to creation order
        return None


@dataclass(frozen=True)
class HistoryNoise:
    """Per kernel (full name) the relative run-to-run sd from past baselines (NaN: too few levels), and
    its degrees of freedom; likewise per op key (``ops``) and per op without scope (``op_groups``), from the
    baselines that store their kernels' ops (``comparison.ops`` judges swapped ops by these)."""

    sd: dict[str, float]
    df: float
    ops: dict[str, float] = field(default_factory=dict)
    op_groups: dict[str, float] = field(default_factory=dict)
    step_levels: list[float] = field(default_factory=list)  # each past baseline's mean step time (ns), if stored
    unit: str = "iteration"  # what one level is per (``side.Unit``): the diff uses ``sd`` in that unit alone


def noise_from_history(reader: StoreReader, policy: Policy, repo: Path | None, first: Resolved,
                       second: Resolved, line_ref: str | None = None) -> tuple[HistoryNoise | None, list[str]]:
    """Per kernel run-to-run sd from the last ``history_baselines`` comparable baselines on the first-parent
    line of ``line_ref`` (the base branch: ``--base-ref`` or ``history_ref``) or else of the before side
    (the after side's own baselines left out), when at least ``min_history`` exist; ``HistoryNoise.df``: its
    degrees of freedom (a MAD-based sd: about 40% of the levels')."""
    if not first.baseline_ids:
        return None, []
    newest = reader.baseline(max(first.baseline_ids))
    notes: list[str] = []
    depth = 10 * policy.history_baselines
    commits = first_parent_line(repo, line_ref, depth) if line_ref else None
    where = f"{line_ref}'s first-parent line"
    if line_ref and commits is None:
        notes.append(f"history noise: {line_ref} is not a revision of this repository; the before side's line instead")
    if commits is None:
        commits = first_parent_line(repo, first.commit, depth)
        where = "the before side's first-parent line" if commits is not None else "creation order (no repository)"
    # only baselines aligned as the newest is: one without iteration markers stores no per-iteration
    # level (NULL), which must not count as a level of 0 in an aligned kernel's spread
    past = [b for b in reader.line_baselines(newest.workload, fingerprint=newest.fingerprint, commits=commits,
                                             before_id=None if commits else newest.id, limit=policy.history_baselines)
            if b.id not in set(second.baseline_ids) and b.aligned == newest.aligned]
    if len(past) < policy.min_history:
        return None, notes
    if not newest.aligned:
        return _run_noise(reader, policy, past, first, where, notes)
    ids = [b.id for b in past if b.id is not None]
    names, _, levels = reader.level_matrix(ids)
    sd = history_noise(levels, policy.min_history)
    ops, groups = _op_noise(reader, past, policy.min_history)
    from kbase.comparison.step import step_level

    noise = HistoryNoise(sd=dict(zip(names, sd.tolist())), df=max(0.4 * (len(past) - 1), 2.0), ops=ops,
                         op_groups=groups, step_levels=[x for x in (step_level(b.summary_json) for b in past)
                                                        if x is not None])
    return noise, notes + [f"history noise: {len(past)} past baselines on {where} "
                           f"({int(np.isfinite(sd).sum())} kernels with at least {policy.min_history} levels)"]


def _run_noise(reader: StoreReader, policy: Policy, past: list, first: Resolved, where: str,
               notes: list[str]) -> tuple[HistoryNoise, list[str]]:
    """Without iteration markers, per run: each past baseline's kernel totals per GPU are one run's levels — where
    the baseline spans its whole program (``analysis.span``), or, unless a clock cut it, launched the kernel as
    often per capture as the before side does (the same work; a slice's totals are an accident of where it was
    cut). Their robust spread is the kernel's run-to-run noise, as the per-iteration levels' is with markers."""
    from kbase.analysis.span import PROGRAM, SLICE
    from kbase.comparison.work import COUNT_TOLERANCE
    from kbase.store.blob_reads import run_levels

    ids = [b.id for b in past if b.id is not None]
    name_ids, totals, counts = run_levels(reader.rows_in("level_blobs", {}, "ids", ids), ids)
    found = reader.names(name_ids.tolist())
    names = [found[int(i)][0] for i in name_ids]
    side = first.side
    pos = side.kernels.positions(names)
    before = np.where(pos >= 0, side.kernels["count"][pos] / max(side.n_captures, 1), np.nan)[:, None]
    with np.errstate(invalid="ignore"):
        same = np.abs(counts - before) <= np.maximum(COUNT_TOLERANCE * before, 0.5)
    program = np.array([b.capture_span == PROGRAM for b in past if b.id is not None])[None, :]
    cut = np.array([b.capture_span == SLICE for b in past if b.id is not None])[None, :]
    gpus = np.array([max(int(b.gpu_count), 1) for b in past if b.id is not None], dtype=float)[None, :]
    levels = np.where(program | (same & ~cut), totals / gpus, np.nan)
    sd = history_noise(levels, policy.min_history)
    n_program = int(program.sum())
    noise = HistoryNoise(sd=dict(zip(names, sd.tolist())), df=max(0.4 * (len(ids) - 1), 2.0), unit="run")
    return noise, notes + [f"history noise per run: {len(ids)} past baselines without iteration markers on {where} "
                           f"({n_program} spanning their whole program), each kernel's total per capture "
                           f"({int(np.isfinite(sd).sum())} kernels with at least {policy.min_history} levels)"]


def _op_noise(reader: StoreReader, past: list, min_history: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per op key and per op without scope: the relative run-to-run sd of its time per iteration per GPU over the
    past baselines that store ops (aligned ones: their levels are per iteration)."""
    per_unit = {b.id: b.iterations_used * max(int(b.gpu_count), 1) for b in past
                if b.id is not None and b.aligned and b.iterations_used}
    if not per_unit:
        return {}, {}
    ids = list(per_unit)
    rows = reader.op_levels(ids)
    out = []
    col = {b: j for j, b in enumerate(ids)}
    for key in (1, 2):  # the op key, then the op without its scope (scopes summed)
        summed: dict[tuple[int, str], float] = {}
        for r in rows:
            at_op = (r[0], str(r[key]))
            summed[at_op] = summed.get(at_op, 0.0) + float(r[3])
        names = sorted({name for _, name in summed})
        at = {n: i for i, n in enumerate(names)}
        matrix = np.full((len(names), len(ids)), np.nan)  # NaN: the op did not run in that baseline
        for (b, name), total in summed.items():
            matrix[at[name], col[b]] = total / per_unit[b]
        out.append(dict(zip(names, history_noise(matrix, min_history).tolist())))
    return out[0], out[1]


@dataclass(repr=False)
class StepsReport(Shown):  # shows itself with render.notebook's formatters
    workload: str
    commits: list[str]  # the line's commits with baselines, oldest first
    baselines: int
    steps: list[KernelStep]  # largest effect on the iteration first
    notes: list[str] = field(default_factory=list)
    commit_notes: dict[str, CommitNote] = field(default_factory=dict)  # subject and date of the steps' commits
    setup_changes: list[SetupChange] = field(default_factory=list)  # where the GPU or window changes on the line

    @property
    def table(self) -> pd.DataFrame:
        """The steps as a DataFrame, largest effect first (pandas is imported here, on first use)."""
        import pandas as pd

        rows = []
        for s in self.steps:
            note = self.commit_notes.get(s.first_commit)
            rows.append({**dataclasses.asdict(s), "subject": note.subject if note else "",
                         "commit_date": note.date if note else None})
        return pd.DataFrame(rows, columns=[*STEP_FIELDS, "subject", "commit_date"])


STEP_FIELDS = ["name", "short_name", "kind", "from_commit", "first_commit", "to_commit", "before_ns", "after_ns",
               "rel", "effect", "steps", "z"]  # a KernelStep's fields, in the order StepsReport.table lists them


STEP_SERIES = "(step time per iteration)"


def _with_budget_series(bs: list, names: list[str], shorts: list[str], levels: np.ndarray):
    """The kernels' levels with the step time from the budget (``Baseline.step_ns``) as one more series, when
    every baseline of the line stores it: a step in the step time is found like a kernel's."""
    extra = []
    # the step time only: idle moves opposite to the kernels whenever the GPU has slack (``kbase history (idle)``
    # follows it), the step is the verdict
    for attr, label in (("step_ns", STEP_SERIES),):
        vals = [getattr(b, attr, None) for b in bs]
        if vals and all(v is not None for v in vals):
            extra.append((label, np.array(vals, dtype=float)))
    if not extra:
        return names, shorts, levels
    rows = np.vstack([levels.reshape(len(names), len(bs)), *[v[None, :] for _, v in extra]])
    return names + [x for x, _ in extra], shorts + [x for x, _ in extra], rows


def steps_report(reader: StoreReader, workload: str, repo: Path | None, *, last: int,
                 rev: str) -> StepsReport:
    """Steps and creeps of every kernel over the last ``last`` baselines of ``workload`` on the
    first-parent line ending at ``rev`` (creation order without a repository), found within each setup
    (``comparison.setups``: GPU model/count and window), never across a change of it, which is listed
    (``setup_changes``)."""
    notes: list[str] = []
    commits = first_parent_line(repo, rev, 10 * last)
    if commits is None:
        notes.append("no git repository: baselines in creation order")
    bs = reader.line_points(workload, commits=commits, limit=last)
    changes = setup_changes(bs)
    note = changes_note(changes, "steps are found")
    if note:
        notes.append(note)
    unmarked = [b for b in bs if not b.aligned]
    if unmarked:  # no per-iteration time stored: their levels would read as 0
        notes.append(f"{len(unmarked)} baseline(s) left out: captured without iteration markers (NVTX or "
                     "ProfilerStep ranges), they store no time per iteration to follow")
        bs = [b for b in bs if b.aligned]
    found: list[KernelStep] = []
    used: list = []
    for group in setup_groups(bs):
        line_bs = [bs[i] for i in group]
        ids = [b.id for b in line_bs if b.id is not None]
        names, shorts, levels = reader.level_matrix(ids) if ids else ([], [], np.zeros((0, 0)))
        if not names:
            continue
        walls = np.array([b.window_ns / b.iterations_used if b.iterations_used else np.nan for b in line_bs])
        wall = float(np.nanmedian(walls)) if np.isfinite(walls).any() else float("nan")
        names, shorts, levels = _with_budget_series(line_bs, list(names), list(shorts), levels)
        found += kernel_steps(levels, names, shorts, [b.commit for b in line_bs], wall)
        used += line_bs
    found.sort(key=lambda s: (-abs(s.effect) if s.effect == s.effect else 0.0, s.name))
    at = {b.id: i for i, b in enumerate(bs)}
    used.sort(key=lambda b: at.get(b.id, 0))
    return StepsReport(workload=workload, commits=list(dict.fromkeys(b.commit for b in used)), baselines=len(used),
                       steps=found, notes=notes, setup_changes=changes)
