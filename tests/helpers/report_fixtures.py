"""Shared builders for the report tests: a 50-commit store with two injected steps, and a hostile kernel.

``build_history_report(root)`` generates the store with ``kbase.synth.history.generate_history``
(about 20 s on 2 cores), loads it with ``kbase.render.report.data.load_report`` (the diff across the
second step, commits 33 -> 34) and writes the report. The step markers are the injected truth
until change-point detection exists.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

EVIL_NAME = ('void evil_kernel<"</script><script>alert(1)</script>", \'&amp;\', <b>bold</b>, $x$, |pipe|, '
             '`tick`, *star* _u_ [l](javascript:alert(2)) <!-- @here \x07\u2028\r\n>(int)')
EVIL_SHORT = 'evil_kernel<b>"</script>'


@dataclass
class HistoryReport:
    history: object  # kbase.synth.history.History
    data: object  # ReportData
    out: Path
    pages: list[Path]


def evil_kernel():
    from kbase.synth.generate import KernelSpec

    return KernelSpec(EVIL_NAME, EVIL_SHORT, 450_000, 12)


def build_history_report(root: Path) -> HistoryReport:
    from kbase.render.report.data import load_report
    from kbase.render.report.model import StepMarker
    from kbase.render.report.site import build_report
    from kbase.store import open_store
    from kbase.synth.history import HistorySpec, generate_history

    history = generate_history(root / "history", HistorySpec(extra_kernels=[evil_kernel()]))
    engine = open_store(history.db_url).engine
    try:
        second = history.steps[1].at
        data = load_report(engine, history.workload, subjects_from=history.repo, before=second - 1, after=second)
    finally:
        engine.dispose()
    data.steps = [StepMarker(s.at, s.kernel, (s.factor - 1) * 100) for s in history.steps]
    out = root / "report"
    return HistoryReport(history=history, data=data, out=out, pages=build_report(data, out))
