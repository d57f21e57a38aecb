"""The store's history as the comparison uses it: run-to-run noise per kernel from past baselines on
a branch's first-parent line, and the step changes of every kernel along that line. Computed on what
``comparison.reads`` read (``inputs.HistoryInputs``, ``StepsInputs``): nothing here reads git or the store."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kbase.comparison.noise import history_noise
from kbase.comparison.setups import SetupChange, changes_note, setup_changes
from kbase.display import Shown

if TYPE_CHECKING:
    import pandas as pd

    from kbase.comparison.changepoints import KernelStep
    from kbase.comparison.inputs import HistoryInputs
    from kbase.comparison.side import Side
    from kbase.gitrepo import CommitNote
    from kbase.policy import Policy


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


def noise_of(history: HistoryInputs, before: Side, policy: Policy) -> tuple[HistoryNoise | None, list[str]]:
    """Per kernel run-to-run sd from the past baselines ``comparison.reads.read_history`` read (``history.where``:
    which line), when at least ``min_history`` exist; ``HistoryNoise.df``: its degrees of freedom (a MAD-based sd:
    about 40% of the levels'). ``before``: the pooled before side (without markers, only its launch counts say which
    past totals measured the same work)."""
    notes = list(history.notes)
    past = list(history.past)
    if len(past) < policy.min_history or history.levels is None:
        return None, notes
    if not history.aligned:
        return _run_noise(history, before, policy, notes)
    sd = history_noise(history.levels, policy.min_history)
    ops, groups = _op_noise(history.op_rows, past, policy.min_history)
    from kbase.comparison.step import step_level

    noise = HistoryNoise(sd=dict(zip(history.names, sd.tolist())), df=max(0.4 * (len(past) - 1), 2.0), ops=ops,
                         op_groups=groups, step_levels=[x for x in (step_level(b.summary_json) for b in past)
                                                        if x is not None])
    return noise, notes + [f"history noise: {len(past)} past baselines on {history.where} "
                           f"({int(np.isfinite(sd).sum())} kernels with at least {policy.min_history} levels)"]


def _run_noise(history: HistoryInputs, side: Side, policy: Policy,
               notes: list[str]) -> tuple[HistoryNoise, list[str]]:
    """Without iteration markers, per run: each past baseline's kernel totals per GPU are one run's levels — where
    the baseline spans its whole program (``analysis.span``), or, unless a clock cut it, launched the kernel as
    often per capture as the before side does (the same work; a slice's totals are an accident of where it was
    cut). Their robust spread is the kernel's run-to-run noise, as the per-iteration levels' is with markers."""
    from kbase.analysis.span import PROGRAM, SLICE
    from kbase.comparison.work import COUNT_TOLERANCE

    past = [b for b in history.past if b.id is not None]
    names = list(history.names)
    totals, counts = history.levels, history.counts
    assert totals is not None and counts is not None
    pos = side.kernels.positions(names)
    before = np.where(pos >= 0, side.kernels["count"][pos] / max(side.n_captures, 1), np.nan)[:, None]
    with np.errstate(invalid="ignore"):
        same = np.abs(counts - before) <= np.maximum(COUNT_TOLERANCE * before, 0.5)
    program = np.array([b.capture_span == PROGRAM for b in past])[None, :]
    cut = np.array([b.capture_span == SLICE for b in past])[None, :]
    gpus = np.array([max(int(b.gpu_count), 1) for b in past], dtype=float)[None, :]
    levels = np.where(program | (same & ~cut), totals / gpus, np.nan)
    sd = history_noise(levels, policy.min_history)
    n_program = int(program.sum())
    noise = HistoryNoise(sd=dict(zip(names, sd.tolist())), df=max(0.4 * (len(past) - 1), 2.0), unit="run")
    return noise, notes + [f"history noise per run: {len(past)} past baselines without iteration markers on "
                           f"{history.where} ({n_program} spanning their whole program), each kernel's total per "
                           f"capture ({int(np.isfinite(sd).sum())} kernels with at least {policy.min_history} levels)"]


def _op_noise(rows: Sequence[tuple], past: list, min_history: int) -> tuple[dict[str, float], dict[str, float]]:
    """Per op key and per op without scope: the relative run-to-run sd of its time per iteration per GPU over the
    past baselines that store ops (aligned ones: their levels are per iteration)."""
    per_unit = {b.id: b.iterations_used * max(int(b.gpu_count), 1) for b in past
                if b.id is not None and b.aligned and b.iterations_used}
    if not per_unit:
        return {}, {}
    ids = list(per_unit)
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


@dataclass(frozen=True)
class StepsInputs:
    """What ``kbase steps`` reads (``comparison.reads.read_steps``): the line's baselines (``LinePoint``s, oldest
    first) and, per setup group of the aligned ones (``setups.setup_groups``), its kernels' per-iteration levels."""

    workload: str
    points: tuple = ()
    groups: tuple[tuple[tuple, list[str], list[str], np.ndarray], ...] = ()  # (points, names, shorts, levels)
    notes: tuple[str, ...] = ()


def steps_of(inputs: StepsInputs) -> StepsReport:
    """Steps and creeps of every kernel along the line, found within each setup (``comparison.setups``: GPU
    model/count and window), never across a change of it, which is listed (``setup_changes``)."""
    from kbase.comparison.changepoints import kernel_steps  # here: a diff or gate never looks for steps

    notes = list(inputs.notes)
    bs = list(inputs.points)
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
    for line_bs, names, shorts, levels in inputs.groups:
        if not names:
            continue
        walls = np.array([b.window_ns / b.iterations_used if b.iterations_used else np.nan for b in line_bs])
        wall = float(np.nanmedian(walls)) if np.isfinite(walls).any() else float("nan")
        names, shorts, levels = _with_budget_series(list(line_bs), list(names), list(shorts), levels)
        found += kernel_steps(levels, names, shorts, [b.commit for b in line_bs], wall)
        used += line_bs
    found.sort(key=lambda s: (-abs(s.effect) if s.effect == s.effect else 0.0, s.name))
    at = {b.id: i for i, b in enumerate(bs)}
    used.sort(key=lambda b: at.get(b.id, 0))
    return StepsReport(workload=inputs.workload, commits=list(dict.fromkeys(b.commit for b in used)),
                       baselines=len(used), steps=found, notes=notes, setup_changes=changes)
