"""Output formats -> renderers: one registry per kind of result, keyed by that result's format enum
(``enums.LeaderboardFormat``, ``DiffFormat``, ...). The command line checks the format against the enum (an unknown
one: one line, exit 2), then asks the registry: ``LEADERBOARD.render(fmt, job, Sink.stdout(console))``. A new
output format is an enum member and one function registered here; tests/render/test_formats.py holds every enum
member to a renderer.

Each renderer takes the job (what the command computed, and how it was asked to show it) and a ``Sink`` (stdout's
``write``, and a console made on first use, so ``--format json`` never loads rich). The renderers' own modules load
on first use, so importing this one stays light.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kbase.enums import BisectFormat, DiffFormat, HistoryFormat, LeaderboardFormat

if TYPE_CHECKING:
    from kbase.analysis.board import AnyLeaderboard
    from kbase.comparison.changepoints import KernelStep
    from kbase.comparison.gate import Verdict
    from kbase.comparison.result import Comparison, KernelHistory

F = TypeVar("F", bound=StrEnum)
J = TypeVar("J")


@dataclass(frozen=True)
class Sink:
    """Where a renderer writes: text (``write``), or a rich console for the tables (``console()``)."""

    write: Callable[[str], Any]
    console: Callable[[], Any]

    @classmethod
    def stdout(cls, console: Callable[[], Any]) -> Sink:
        return cls(sys.stdout.write, console)


class Registry(Generic[F, J]):
    """``format -> renderer`` for one kind of result."""

    def __init__(self, what: str, formats: type[F]) -> None:
        self.what = what
        self.formats = formats
        self._renderers: dict[F, Callable[[J, Sink], None]] = {}

    def register(self, *fmts: F) -> Callable[[Callable[[J, Sink], None]], Callable[[J, Sink], None]]:
        def add(fn: Callable[[J, Sink], None]) -> Callable[[J, Sink], None]:
            for f in fmts:
                if f in self._renderers:
                    raise ValueError(f"{self.what}: {f} has a renderer already")
                self._renderers[f] = fn
            return fn

        return add

    def render(self, fmt: F | str, job: J, sink: Sink) -> None:
        """Render ``job`` as ``fmt`` (a member of the enum, or its value, checked by the caller)."""
        self._renderers[self.formats(fmt)](job, sink)

    def missing(self) -> list[F]:
        """The formats without a renderer (none, or the registry is incomplete)."""
        return [f for f in self.formats if f not in self._renderers]


# ------------------------------------------------------------------------------------------ a leaderboard


@dataclass
class LeaderboardJob:
    lb: Any  # AnyLeaderboard; for the op registry a leaderboard with ops
    limit: int | None
    title: str = "Kernel leaderboard"
    extra: dict[str, Any] | None = None  # JSON's extra top-level fields (baseline, workload)
    wide: bool = False
    full_names: bool = False
    quiet: bool = False


LEADERBOARD: Registry[LeaderboardFormat, LeaderboardJob] = Registry("leaderboard", LeaderboardFormat)
# --by op: no benchmark formats (the command line refuses them, one line, before rendering)
OP_LEADERBOARD: Registry[LeaderboardFormat, LeaderboardJob] = Registry("op leaderboard", LeaderboardFormat)


@LEADERBOARD.register(LeaderboardFormat.TABLE)
def _leaderboard_table(j: LeaderboardJob, out: Sink) -> None:
    from kbase.render import leaderboard

    if j.quiet:
        out.console().print(quiet_leaderboard_line(j.lb), highlight=False, markup=False, soft_wrap=True)
    else:
        leaderboard.print_leaderboard(j.lb, out.console(), j.limit, j.title, wide=j.wide, full_names=j.full_names)


@LEADERBOARD.register(LeaderboardFormat.JSON)
def _leaderboard_json(j: LeaderboardJob, out: Sink) -> None:
    from kbase.render.leaderboard import leaderboard_json

    out.write(leaderboard_json(j.lb, j.limit, j.extra) + "\n")


@LEADERBOARD.register(LeaderboardFormat.CSV)
def _leaderboard_csv(j: LeaderboardJob, out: Sink) -> None:
    from kbase.render.leaderboard import leaderboard_csv

    out.write(leaderboard_csv(j.lb, j.limit))


@LEADERBOARD.register(LeaderboardFormat.MD)
def _leaderboard_md(j: LeaderboardJob, out: Sink) -> None:
    from kbase.render.leaderboard import leaderboard_md

    out.write(leaderboard_md(j.lb, j.limit, full_names=j.full_names))


@LEADERBOARD.register(LeaderboardFormat.BMF)
def _leaderboard_bmf(j: LeaderboardJob, out: Sink) -> None:
    from kbase.render import interop

    out.write(interop.dumps_strict(interop.bmf_from_leaderboard(j.lb, _workload(j), j.limit or 0)) + "\n")


@LEADERBOARD.register(LeaderboardFormat.GITHUB_BENCHMARK)
def _leaderboard_github_benchmark(j: LeaderboardJob, out: Sink) -> None:
    from kbase.render import interop

    out.write(interop.dumps_strict(interop.gab_from_leaderboard(j.lb, _workload(j), j.limit or 0)) + "\n")


def _workload(j: LeaderboardJob) -> str:
    meta = j.extra or {}
    return str(meta.get("workload") or (meta.get("baseline") or {}).get("workload") or "kbase")


def quiet_leaderboard_line(lb: AnyLeaderboard) -> str:
    """The leaderboard in one line: kernel time per iteration per GPU and the top kernel."""
    from kbase.analysis.board import board_of
    from kbase.render.safe import inert
    from kbase.units import fmt_ns, fmt_pct

    board = board_of(lb)
    s, rows = board.summary, board.rows
    top = rows[0] if rows else None
    per_iter = fmt_ns(s.kernel_ns_per_iter) + " kernel time per iteration per GPU" if s.kernel_ns_per_iter is not None \
        else f"{fmt_ns(float(sum(r['total_ns'] for r in rows)))} kernel time in the window"
    head = f"{len(rows)} kernels, {per_iter}"
    if top is not None:
        head += f"; top: {inert(str(top['short_name']))} {fmt_pct(top['share_kernel'])}"
    return head


@OP_LEADERBOARD.register(LeaderboardFormat.TABLE)
def _ops_table(j: LeaderboardJob, out: Sink) -> None:
    from kbase.render import ops

    if j.quiet:
        rows = ops.op_rows(j.lb)
        top = f"; top op: {rows[0]['op'] or ops.NO_OP_LABEL}" if rows else ""
        out.console().print(f"{len(rows)} ops{top}" if j.lb.ops is not None else ops.no_ops_note("table", j.lb.notes),
                            highlight=False, markup=False, soft_wrap=True)
    else:
        ops.print_op_leaderboard(j.lb, out.console(), j.limit, wide=j.wide, full_names=j.full_names)


@OP_LEADERBOARD.register(LeaderboardFormat.JSON)
def _ops_json(j: LeaderboardJob, out: Sink) -> None:
    from kbase.render.ops import op_leaderboard_json

    out.write(op_leaderboard_json(j.lb, j.limit) + "\n")


@OP_LEADERBOARD.register(LeaderboardFormat.CSV)
def _ops_csv(j: LeaderboardJob, out: Sink) -> None:
    from kbase.render.ops import op_leaderboard_csv

    out.write(op_leaderboard_csv(j.lb, j.limit))


@OP_LEADERBOARD.register(LeaderboardFormat.MD)
def _ops_md(j: LeaderboardJob, out: Sink) -> None:
    from kbase.render.ops import op_leaderboard_md

    out.write(op_leaderboard_md(j.lb, j.limit, full_names=j.full_names))


# ------------------------------------------------------------------------------------------ a diff or a gate


@dataclass
class DiffJob:
    doc: dict[str, Any]  # render.diff.diff_doc of the comparison
    comparison: Comparison
    show_all: bool = False
    verdict: Verdict | None = None  # a gate's
    wide: bool = False
    full_names: bool = False
    quiet: bool = False
    by_op: bool = False


DIFF: Registry[DiffFormat, DiffJob] = Registry("diff", DiffFormat)


@DIFF.register(DiffFormat.TABLE)
def _diff_table(j: DiffJob, out: Sink) -> None:
    from kbase.render import diff

    if j.quiet:
        out.console().print(diff.quiet_line(j.doc, j.verdict), highlight=False, markup=False, soft_wrap=True)
    else:
        diff.print_diff(j.doc, out.console(), j.show_all, j.verdict, wide=j.wide, full_names=j.full_names,
                        by_op=j.by_op)


@DIFF.register(DiffFormat.JSON)
def _diff_json(j: DiffJob, out: Sink) -> None:
    from kbase.render.diff import diff_json

    out.write(diff_json(j.doc) + "\n")


@DIFF.register(DiffFormat.MD)
def _diff_md(j: DiffJob, out: Sink) -> None:
    from kbase.render.diff import diff_md

    out.write(diff_md(j.doc, j.show_all, j.verdict, full_names=j.full_names, by_op=j.by_op))


@DIFF.register(DiffFormat.CSV)
def _diff_csv(j: DiffJob, out: Sink) -> None:
    if j.by_op:
        from kbase.render.ops import diff_op_csv

        out.write(diff_op_csv(j.doc))
    else:
        from kbase.render.diff import diff_csv

        out.write(diff_csv(j.comparison))


@DIFF.register(DiffFormat.BMF)
def _diff_bmf(j: DiffJob, out: Sink) -> None:
    from kbase.render import interop

    out.write(interop.dumps_strict(interop.bmf_from_diff(j.doc)) + "\n")


@DIFF.register(DiffFormat.GITHUB_BENCHMARK)
def _diff_github_benchmark(j: DiffJob, out: Sink) -> None:
    from kbase.render import interop

    out.write(interop.dumps_strict(interop.gab_from_diff(j.doc)) + "\n")


# ------------------------------------------------------------------------------------------ bisect, history


@dataclass
class BisectJob:
    result: Any  # api.bisecting.BisectResult (the API sits above render: its fields are read, not its type)
    wide: bool = False


BISECT: Registry[BisectFormat, BisectJob] = Registry("bisect", BisectFormat)


@BISECT.register(BisectFormat.TEXT)
def _bisect_text(j: BisectJob, out: Sink) -> None:
    from kbase.render.bisect import print_bisect

    print_bisect(j.result, out.console(), wide=j.wide)


@BISECT.register(BisectFormat.JSON)
def _bisect_json(j: BisectJob, out: Sink) -> None:
    from kbase.render.bisect import bisect_json

    out.write(bisect_json(j.result) + "\n")


@BISECT.register(BisectFormat.MARKDOWN)
def _bisect_md(j: BisectJob, out: Sink) -> None:
    from kbase.render.bisect import bisect_md

    out.write(bisect_md(j.result))


@dataclass
class HistoryJob:
    history: KernelHistory
    steps: list[KernelStep] | None  # the kernel's steps (None: the one-line answer, which shows none)
    branch: str | None
    limit: int | None
    wide: bool = False
    quiet: bool = False


HISTORY: Registry[HistoryFormat, HistoryJob] = Registry("history", HistoryFormat)


@HISTORY.register(HistoryFormat.TABLE)
def _history_table(j: HistoryJob, out: Sink) -> None:
    from kbase.render.history import print_history

    print_history(j.history, out.console(), wide=j.wide, quiet=j.quiet, limit=j.limit)
    if not j.quiet:
        from kbase.render.steps import print_kernel_steps

        print_kernel_steps(j.steps, out.console())


@HISTORY.register(HistoryFormat.JSON)
def _history_json(j: HistoryJob, out: Sink) -> None:
    from kbase.render.history import history_json

    out.write(history_json(j.history, j.history.workload, j.branch, j.steps, j.limit) + "\n")


@HISTORY.register(HistoryFormat.CSV)
def _history_csv(j: HistoryJob, out: Sink) -> None:
    from kbase.render.history import history_csv

    out.write(history_csv(j.history, j.steps, j.limit))
