"""The front door: every kbase pipeline, as one call each. The CLI is parse -> one call here -> render.

    import kbase

    settings = kbase.Settings.load(db="sqlite:///kbase.db", name="train-8gpu")
    lb = kbase.top("train.sqlite", settings)               # read -> window -> leaderboard
    kbase.snapshot("train.sqlite", settings)               # ... -> store at HEAD
    result = kbase.gate("HEAD~1", "HEAD", settings)        # resolve -> diff -> decide
    result.verdict.code                                    # 0 pass, 1 regression, 2 incomparable

Stages, each a typed function of its own package: ``readers.read_profile`` -> ``analysis.window.
select_window`` -> ``analysis.leaderboard.build_leaderboard`` -> ``store.queries.save_leaderboard`` ->
``compare.diff.compute_diff`` -> ``compare.gate.decide`` -> ``render``. Functions that touch the store
take an open ``Store`` or open (and close) the one ``settings`` names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import kbase.render.notebook  # noqa: F401 - registers how every result shows itself in a notebook (light)

if TYPE_CHECKING:
    from kbase.api.bisecting import BisectResult, bisect
    from kbase.api.budgeting import BudgetResult, budget
    from kbase.api.capture import (
        Baselines,
        SnapshotResult,
        StoredLeaderboard,
        baseline,
        baselines,
        leaderboard,
        read,
        remove,
        snapshot,
        window,
    )
    from kbase.api.common import Progress, _store  # noqa: F401 - _store: an open-or-given store, for tests
    from kbase.api.comparing import (
        Comparison,
        GateResult,
        accept,
        acceptances,
        compare,
        gate,
        kernel_pattern,
        revoke,
    )
    from kbase.api.housekeeping import PruneResult, prune
    from kbase.api.kernels import KernelHistory, find_kernel, history, history_steps, steps
    from kbase.api.reporting import report, report_data
    from kbase.api.top_answer import top
    from kbase.api.transfer import ExportResult, ImportResult, export_baselines, import_baselines
    from kbase.comparison.history import StepsReport
    from kbase.settings import Settings

__all__ = ["Baselines", "BisectResult", "BudgetResult", "Comparison", "ExportResult", "GateResult", "ImportResult",
           "KernelHistory", "PruneResult", "Settings", "SnapshotResult", "StepsReport", "StoredLeaderboard", "accept",
           "acceptances", "baseline", "baselines", "bisect", "budget", "compare", "export_baselines", "find_kernel",
           "gate", "history", "history_steps",
           "import_baselines", "kernel_pattern", "leaderboard", "prune", "read", "remove", "report", "report_data",
           "revoke", "snapshot", "steps", "top", "window"]

# Where each name lives: a name loads its module on first use, so a command imports only the calls it makes
# (``kbase top`` of a cached file needs neither the store's writers nor the comparison).
_HOME = {
    "BisectResult": "bisecting", "bisect": "bisecting", "BudgetResult": "budgeting", "budget": "budgeting",
    **dict.fromkeys(["Baselines", "SnapshotResult", "StoredLeaderboard", "baseline", "baselines", "leaderboard",
                     "read", "remove", "snapshot", "window"], "capture"),
    "Progress": "common", "_store": "common",
    **dict.fromkeys(["Comparison", "GateResult", "accept", "acceptances", "compare", "gate", "kernel_pattern",
                     "revoke"], "comparing"),
    "PruneResult": "housekeeping", "prune": "housekeeping",
    **dict.fromkeys(["KernelHistory", "find_kernel", "history", "history_steps", "steps"], "kernels"),
    "report": "reporting", "report_data": "reporting", "top": "top_answer",
    **dict.fromkeys(["ExportResult", "ImportResult", "export_baselines", "import_baselines"], "transfer"),
}


def __dir__() -> list[str]:
    return sorted(set(__all__) | set(_HOME) | {n for n in globals() if n.startswith("__")})


def __getattr__(name: str) -> Any:
    import importlib

    if name == "StepsReport":  # what ``steps`` returns: numpy comes with it, so it loads on first use
        from kbase.comparison.history import StepsReport

        return StepsReport
    if name == "Settings":
        from kbase.settings import Settings

        return Settings
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'kbase.api' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"kbase.api.{home}"), name)
    globals()[name] = value  # once: later look-ups (and monkeypatching) see a plain attribute
    return value
