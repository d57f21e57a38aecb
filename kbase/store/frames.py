"""The column order of the kernel and level rows both read paths return (the SQLAlchemy queries and the
read-only ``fast_read``: the same plain tuples), and the kernel DataFrame a stored Leaderboard is built
from (``queries.load_kernels``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

# ``queries.load_kernels``: every ``baseline_kernel`` column in the model's order, then the name columns.
KERNEL_COLUMNS = (
    "id", "baseline_id", "name_id", "rank", "gpus", "count", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns",
    "std_ns", "per_iter_ns", "count_per_iter", "share_window", "share_kernel", "amdahl_ceiling", "fragmented",
    "iter_ns", "iter_count", "launch_sketch", "name", "family", "short_name", "category", "tc",
)
LEVEL_COLUMNS = ("baseline_id", "name", "short_name", "per_iter_ns")


def kernels_frame(rows: list[tuple], columns: list[str]) -> pd.DataFrame:
    """Kernel rows as ``load_kernels`` returns them (pandas infers each column's dtype from the values)."""
    import pandas as pd  # here, not at the top: list/history/db never load pandas

    return pd.DataFrame(rows, columns=columns)
