"""Which leaderboard columns the kernel blobs (``kernel_blobs``) hold, read from their declaration
(``analysis.columns.LEADERBOARD``: ``Stat.blob``, ``Stat.kind``). The columns format 2 encodes by hand (``CODED``)
keep their layout; a column declared since is kept whole after them in its blob (float64, int64 when ``integer``)
and read back so, NaN from a store older than its declaration; one that follows from the others
(``Stat.compute``) is never stored: it is computed on read, as ``build_leaderboard`` computes it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kbase.analysis import columns as registry

if TYPE_CHECKING:
    import numpy as np

CODED = frozenset({"count", "total_ns", "avg_ns", "per_iter_ns", "share_window", "gpus", "median_ns", "min_ns",
                   "max_ns", "std_ns", "count_per_iter", "share_kernel", "amdahl_ceiling", "fragmented"})
INT_COLUMNS = frozenset({"name_id", "count", "total_ns", "gpus", "min_ns", "max_ns"})
NAN = float("nan")


def level_columns() -> tuple[str, ...]:
    """The ``levels`` blob's columns (``name_id`` first: held beside the blobs, ``kernel_ids``)."""
    return ("name_id", *(s.name for s in registry.stored("levels")))


def board_columns() -> tuple[str, ...]:
    return tuple(s.name for s in registry.stored("board"))


def derived_columns() -> tuple[str, ...]:
    """The columns computed on read (kept, whole, only where they do not so derive)."""
    return tuple(s.name for s in registry.LEADERBOARD if s.kind == registry.Kind.DERIVED and s.blob)


def declared() -> list[registry.Stat]:
    """The stored columns declared beyond the hand-coded ones (``KernelTable.extra``)."""
    return [s for s in registry.LEADERBOARD if s.blob and s.name not in CODED and s.compute is None
            and s.kind in (registry.Kind.STORED, registry.Kind.DERIVED)]


def stored_in(name: str) -> str:
    """The blob declared to hold column ``name`` ("" where none)."""
    return next((s.blob for s in registry.LEADERBOARD if s.name == name), "")


def dtype_of(name: str) -> Any:
    import numpy as np

    if name in INT_COLUMNS or any(s.name == name and s.integer for s in registry.LEADERBOARD):
        return np.int64
    return bool if any(s.name == name and s.unit == "flag" for s in registry.LEADERBOARD) else np.float64


def extra_columns(table: Any, blob: str) -> dict[str, tuple[np.ndarray, dict[str, bool]]]:
    """The declared columns beyond the hand-coded ones that ``blob`` keeps (those ``table.extra``, a
    ``kernel_blobs.KernelTable``'s, holds), whole, in declaration order."""
    import numpy as np

    out: dict[str, tuple[np.ndarray, dict[str, bool]]] = {}
    for s in declared():
        if s.blob == blob and s.name in table.extra:
            values = np.asarray(table.extra[s.name])
            out[s.name] = ((values.astype(np.int64), {}) if s.integer else
                           (np.where(np.isnan(values), np.nan, values).astype(np.float64), {"as_float": True}))
    return out


class _Inputs(dict):
    """The columns a ``Stat.compute`` reads, as numpy arrays decoded on first use."""

    def __init__(self, rows: Any) -> None:
        super().__init__()
        self._rows = rows

    def __missing__(self, name: str) -> Any:
        import numpy as np

        self[name] = np.asarray(self._rows.column(name))
        return self[name]


def declared_column(rows: Any, name: str, packed: Any) -> list:
    """Column ``name`` of a ``kernel_blobs.LevelRows`` beyond the hand-coded ones: computed from the others
    (``Stat.compute``), kept whole in ``packed`` (its blob), or NaN where a store older than its declaration
    lacks it."""
    stat = next((s for s in registry.LEADERBOARD if s.name == name and s.blob), None)
    if stat is None:
        raise KeyError(name)
    if stat.compute is not None:
        import numpy as np

        return np.asarray(stat.compute(_Inputs(rows)), dtype=float).tolist()
    if packed is not None and name in packed:
        return packed.ints(name) if stat.integer else packed.floats(name)
    return [NAN] * rows.rows
