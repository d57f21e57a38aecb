"""The DataFrames the comparison reads from the store, built from plain row tuples. Both read paths (the
SQLAlchemy queries and the read-only ``sqlite_read``) hand their rows to these same functions, so the
frames they return are identical: columns, dtypes and values."""

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


def levels_frame(rows: list[tuple], baseline_ids: list[int]) -> pd.DataFrame:
    """``kernel_levels`` from (baseline_id, name, short_name, per_iter_ns) rows: per kernel (rows: name;
    columns: the baselines in the order given) its time per iteration per GPU, NaN where it did not run."""
    import pandas as pd

    df = pd.DataFrame(rows, columns=list(LEVEL_COLUMNS))
    wide = df.pivot_table(index="name", columns="baseline_id", values="per_iter_ns", aggfunc="sum")
    wide = wide.reindex(columns=baseline_ids).astype(float)
    wide.attrs["short_name"] = df.drop_duplicates("name").set_index("name")["short_name"].to_dict()
    return wide
