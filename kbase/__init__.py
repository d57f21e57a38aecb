"""kbase: keep every commit's GPU kernel leaderboard and tell each change which kernels got fatter.

The front door is ``kbase.api``, re-exported here (``kbase.top``, ``kbase.snapshot``, ``kbase.gate``,
...). Names load on first use, so ``import kbase`` (and ``kbase --help``) stays fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbase.version import __version__

__all__ = ["Comparison", "GateResult", "KernelHistory", "Settings", "SnapshotResult", "StoredLeaderboard",
           "StoredRows", "__version__", "accept", "acceptances", "baseline", "baseline_rows", "baselines", "compare",
           "find_kernel", "gate", "history", "history_steps", "kernel_pattern", "leaderboard", "read", "remove",
           "report", "revoke", "snapshot", "steps", "top", "top_rows", "window"]

if TYPE_CHECKING:
    from kbase.api import (  # noqa: F401
        Comparison,
        GateResult,
        KernelHistory,
        Settings,
        SnapshotResult,
        StoredLeaderboard,
        StoredRows,
        accept,
        acceptances,
        baseline,
        baseline_rows,
        baselines,
        compare,
        find_kernel,
        gate,
        history,
        history_steps,
        kernel_pattern,
        leaderboard,
        read,
        remove,
        report,
        revoke,
        snapshot,
        steps,
        top,
        top_rows,
        window,
    )


def __getattr__(name: str) -> Any:
    if name in __all__:
        from kbase import api

        return getattr(api, name)
    raise AttributeError(f"module 'kbase' has no attribute {name!r}")
