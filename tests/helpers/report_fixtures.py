"""Shared builders for the report tests: a 50-commit store with two injected steps, and a hostile kernel.

``build_history_report(root)`` generates the store with ``kbase.synth.history.generate_history``
(about 20 s on 2 cores), loads it with ``kbase.report_data`` (the diff across the second step, commits
33 -> 34: ``kbase gate`` of that pair; the step markers: ``kbase steps``) and writes the report.
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
    import kbase
    from kbase.render.report.site import build_report
    from kbase.synth.history import HistorySpec, generate_history

    history = generate_history(root / "history", HistorySpec(extra_kernels=[evil_kernel()]))
    second = history.steps[1].at
    settings = kbase.Settings.load(repo=history.repo, db=history.db_url, name=history.workload)
    data = kbase.report_data(settings, before=second - 1, after=second)
    out = root / "report"
    return HistoryReport(history=history, data=data, out=out, pages=build_report(data, out))
