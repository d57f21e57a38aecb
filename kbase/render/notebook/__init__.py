"""How every result kbase returns shows itself in a notebook, in one place: which formatter shows which class.

The objects live in every layer (the leaderboard in ``analysis``, the comparison in ``comparison``, the snapshot's
result in ``api``) and inherit ``display.Shown``, whose ``__repr__`` and ``_repr_html_`` ask the registry in
``display``; the formatters live here, above the objects they format, and register by class name
(``display.show_by_name``, as IPython's ``for_type_by_name``), so no import points up and no object's module
imports its formatter. ``kbase.api`` imports this package: every object the API returns shows its one-line
``repr`` and its HTML table. The formatters' modules load on first show (``import kbase.api`` stays light).

A new result type: inherit ``Shown``, write its line and HTML in a module here, add its row to ``SHOWN``.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from kbase.display import ShowHtml, ShowLine, show_by_name


def _comparison() -> ModuleType:
    from kbase.render.notebook import comparison

    return comparison


def _history() -> ModuleType:
    from kbase.render.notebook import history

    return history


def _leaderboard() -> ModuleType:
    from kbase.render.notebook import leaderboard

    return leaderboard


def _stored() -> ModuleType:
    from kbase.render.notebook import stored

    return stored


def _budget_html(r: Any) -> str:
    from kbase.render.budget import budget_html

    return budget_html(r.budget, r.source)


SHOWN: dict[str, tuple[ShowLine, ShowHtml]] = {  # class (module.QualName) -> (its one-line repr, its HTML)
    "kbase.analysis.leaderboard.Leaderboard": (lambda lb: _leaderboard().leaderboard_line(lb),
                                               lambda lb: _leaderboard().leaderboard_html(lb)),
    "kbase.analysis.board.LeaderboardRows": (lambda lb: _leaderboard().leaderboard_line(lb, "LeaderboardRows"),
                                             lambda lb: _leaderboard().leaderboard_html(lb)),
    "kbase.comparison.result.Comparison": (lambda c: _comparison().comparison_line(c),
                                           lambda c: _comparison().comparison_html(c)),
    "kbase.comparison.result.GateResult": (lambda g: _comparison().gate_line(g), lambda g: _comparison().gate_html(g)),
    "kbase.comparison.result.KernelHistory": (lambda h: _history().history_line(h),
                                              lambda h: _history().history_html(h)),
    "kbase.comparison.history.StepsReport": (lambda r: _history().steps_line(r), lambda r: _history().steps_html(r)),
    "kbase.api.storing.SnapshotResult": (
        lambda r: _stored().stored_line("SnapshotResult", r.baseline, r.leaderboard, r.created),
        lambda r: _stored().stored_html("SnapshotResult", r.baseline, r.leaderboard, r.created)),
    "kbase.api.capture.StoredLeaderboard": (
        lambda r: _stored().stored_line("StoredLeaderboard", r.baseline, r.leaderboard),
        lambda r: _stored().stored_html("StoredLeaderboard", r.baseline, r.leaderboard)),
    "kbase.api.capture.Baselines": (lambda rows: _stored().baselines_line(rows),
                                    lambda rows: _stored().baselines_html(rows, rows.commit_notes)),
    "kbase.api.budgeting.BudgetResult": (lambda r: _stored().budget_result_line(r.budget), _budget_html),
}

for _name, (_line, _html) in SHOWN.items():
    show_by_name(_name, _line, _html)
