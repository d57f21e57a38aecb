"""kbase: keep every commit's GPU kernel leaderboard and tell each change which kernels got fatter.

The front door is ``kbase.api``, re-exported here (``kbase.top``, ``kbase.snapshot``, ``kbase.gate``,
...). Names load on first use, so ``import kbase`` (and ``kbase --help``) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbase.version import __version__

__all__ = ["Baselines", "BisectResult", "BudgetResult", "Comparison", "ExportResult", "GateResult", "ImportResult",
           "KernelHistory", "PruneResult", "Settings", "SnapshotResult", "StepsReport", "StoredLeaderboard", "accept",
           "acceptances", "baseline", "baselines", "bisect", "budget", "compare", "export_baselines", "find_kernel",
           "gate", "history", "history_steps",
           "import_baselines", "kernel_pattern", "leaderboard", "prune", "read", "remove", "report", "report_data",
           "revoke", "snapshot", "steps", "top", "window", "__version__"]

if TYPE_CHECKING:
    from kbase.api import (  # noqa: F401
        Baselines,
        BisectResult,
        BudgetResult,
        Comparison,
        ExportResult,
        GateResult,
        ImportResult,
        KernelHistory,
        PruneResult,
        Settings,
        SnapshotResult,
        StepsReport,
        StoredLeaderboard,
        accept,
        acceptances,
        baseline,
        baselines,
        bisect,
        budget,
        compare,
        export_baselines,
        find_kernel,
        gate,
        history,
        history_steps,
        import_baselines,
        kernel_pattern,
        leaderboard,
        prune,
        read,
        remove,
        report,
        report_data,
        revoke,
        snapshot,
        steps,
        top,
        window,
    )


def __dir__() -> list[str]:
    """The API with the module's own attributes, so ``dir(kbase)`` and tab completion show every call."""
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__")})


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kbase import api

        return getattr(api, name)
    raise AttributeError(f"module 'kbase' has no attribute {name!r}")
