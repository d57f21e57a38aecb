"""Writing the store (SQLAlchemy Core over the SQLModel tables), and a stored leaderboard as the DataFrame
``build_leaderboard`` made. Every read is ``reader.StoreReader``'s (the one read layer).

Writes are single transactions (``write_transaction``): a baseline and all its rows, or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select

from kbase.errors import InputError, KbaseError, StoreError
from kbase.store.codec import baseline_row, kernel_naming, kernel_rows, leaderboard_from_rows, name_hash, op_rows
from kbase.store.engine import write_transaction
from kbase.store.frames import KERNEL_COLUMNS, kernels_frame
from kbase.store.models import (
    ACCEPTANCE,
    BASELINE,
    BASELINE_KERNEL,
    BASELINE_KERNEL_OP,
    KERNEL_NAME,
    OP_NAME,
    Acceptance,
    Baseline,
)
from kbase.store.reader import EngineReader

if TYPE_CHECKING:
    import pandas as pd
    from sqlalchemy.engine import Connection, Engine

    from kbase.analysis.leaderboard import Leaderboard
    from kbase.gitrepo import CommitInfo
    from kbase.readers.source import SourceInfo

_NAME_CHUNK = 400


def name_ids(conn: Connection, kernels: list[tuple[str, str, str, str, str]]) -> dict[str, int]:
    """Ids of the kernel names, inserting those not yet known (race-safe upsert). ``kernels``: (name, family,
    short name, category, tc) of each kernel (``codec.kernel_naming``); a repeated name keeps its first."""
    first = {k[0]: k for k in reversed(kernels)}  # (reversed: the first of a repeated name wins)
    rows = [
        {
            "name_hash": name_hash(name),
            "name": name,
            "family_hash": name_hash(family),
            "family": family,
            "short_name": short,
            "category": category,
            "tc": tc,
        }
        for name, family, short, category, tc in first.values()
    ]
    return _upsert_names(conn, KERNEL_NAME, rows)


def op_ids(conn: Connection, ops: list[tuple[str, str]]) -> dict[str, int]:
    """Ids of the op keys ((key, op without scope) each), inserting those not yet known (as ``name_ids``)."""
    rows = [{"name_hash": name_hash(key), "key": key, "op": bare} for key, bare in dict(ops).items()]
    return _upsert_names(conn, OP_NAME, rows, "key")


def _upsert_names(conn: Connection, table: Any, rows: list[dict[str, Any]], name: str = "name") -> dict[str, int]:
    """name -> id of ``rows`` (with ``name_hash`` and the ``name`` column) in a names table, inserting the
    missing ones."""
    from sqlalchemy.dialects.postgresql import insert as pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    insert: Any = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    kn = table
    # One global insert order: two writers adding overlapping new names in different (leaderboard)
    # orders would each wait on the other's uncommitted row — a deadlock on PostgreSQL.
    rows.sort(key=lambda row: row["name_hash"])
    ids: dict[str, int] = {}
    by_hash = {row["name_hash"]: row[name] for row in rows}
    for i in range(0, len(rows), _NAME_CHUNK):
        chunk = rows[i : i + _NAME_CHUNK]
        hashes = [row["name_hash"] for row in chunk]
        # Known names are only looked up: the insert (and its per-row parameter processing) is paid
        # for new names only, which after the first baseline of a workload is almost none.
        found: dict[str, int] = dict(conn.execute(select(kn.c.name_hash, kn.c.id)
                                                  .where(kn.c.name_hash.in_(hashes))).all())
        missing = [row for row in chunk if row["name_hash"] not in found]
        if missing:
            conn.execute(insert(kn).on_conflict_do_nothing(index_elements=["name_hash"]), missing)
            new = [row["name_hash"] for row in missing]
            found.update(conn.execute(select(kn.c.name_hash, kn.c.id).where(kn.c.name_hash.in_(new))).all())
        for h, nid in found.items():
            ids[by_hash[h]] = nid
    return ids


def insert_kernels(conn: Connection, rows: list[dict], chunk: int = 2000, table: Any = BASELINE_KERNEL) -> None:
    bk = table
    for i in range(0, len(rows), chunk):
        conn.execute(bk.insert(), rows[i : i + chunk])


CAPTURE_KEY = ("workload", "commit", "source_sha256", "window_spec", "capture_copy")


@dataclass(frozen=True)
class Saved:
    baseline: Baseline
    created: bool  # False: this capture was already stored at this commit (the stored row is returned)


def save_leaderboard(engine: Engine, lb: Leaderboard, *, workload: str, commit: CommitInfo, source: SourceInfo,
                     window_spec: str, tags: list[str] | None = None, note: str = "", url: str = "",
                     force: bool = False) -> Saved:
    """Store one leaderboard as a baseline, atomically and at most once per capture: the unique capture
    key (workload, commit, sha256, window, copy) decides, so concurrent identical snapshots store one row.
    ``force`` stores another copy (the next copy number) of a capture already stored."""
    base = baseline_row(lb, workload=workload, commit=commit, source=source, window_spec=window_spec, tags=tags,
                        note=note)
    values = base.model_dump(exclude={"id"})
    keys = [int(k) for k in lb.summary.iteration_keys]
    try:
        with write_transaction(engine, url) as conn:
            for _ in range(20):  # a concurrent --force took this copy number: take the next
                values["capture_copy"] = _next_copy(conn, values) if force else 0
                baseline_id = conn.execute(_insert_ignoring_duplicate(conn, values)).scalar()
                if baseline_id is not None or not force:
                    break
            if baseline_id is None:
                existing = _same_capture(conn, values)
                if existing is None or force:
                    raise StoreError("store: the capture key is taken but its row cannot be read; try again")
                return Saved(existing, created=False)
            names = name_ids(conn, kernel_naming(lb))
            insert_kernels(conn, kernel_rows(baseline_id, lb, names, keys))
            if lb.ops is not None:
                ops = op_ids(conn, list(zip(lb.ops.names.tolist(), lb.ops.bare.tolist())))
                insert_kernels(conn, op_rows(baseline_id, lb.ops, names, ops), table=BASELINE_KERNEL_OP)
    except KbaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - driver errors become one line; the transaction rolled back
        raise StoreError(f"store: could not save the baseline ({type(exc).__name__}: {exc})") from None
    base.id = baseline_id
    base.capture_copy = values["capture_copy"]
    return Saved(base, created=True)


def _capture_where(values: dict[str, Any]) -> list[Any]:
    return [BASELINE.c[k] == values[k] for k in CAPTURE_KEY[:-1]]


def _next_copy(conn: Connection, values: dict[str, Any]) -> int:
    top = conn.execute(select(func.max(BASELINE.c.capture_copy)).where(*_capture_where(values))).scalar()
    return 0 if top is None else int(top) + 1


def _insert_ignoring_duplicate(conn: Connection, values: dict[str, Any]) -> Any:
    from sqlalchemy.dialects.postgresql import insert as pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    insert: Any = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    return (insert(BASELINE).values(**values).on_conflict_do_nothing(index_elements=list(CAPTURE_KEY))
            .returning(BASELINE.c.id))


def _same_capture(conn: Connection, values: dict[str, Any]) -> Baseline | None:
    res = conn.execute(select(BASELINE).where(*_capture_where(values), BASELINE.c.capture_copy == 0))
    row = res.fetchone()
    return Baseline(**dict(zip(res.keys(), row))) if row is not None else None


def load_kernels(engine: Engine, baseline_ids: list[int]) -> pd.DataFrame:
    """Kernel rows of the given baselines joined with their names (``reader.kernel_rows``) as a DataFrame."""
    return kernels_frame(EngineReader(engine).kernel_rows(baseline_ids), list(KERNEL_COLUMNS))


def load_leaderboard(engine: Engine, baseline_id: int) -> Leaderboard:
    """The stored Leaderboard of a baseline, as ``build_leaderboard`` made it."""
    return leaderboard_from_rows(EngineReader(engine).baseline(baseline_id), load_kernels(engine, [baseline_id]))


def delete_baseline(engine: Engine, baseline_id: int, url: str = "") -> None:
    EngineReader(engine).baseline(baseline_id)  # an InputError naming @ID when there is none
    with write_transaction(engine, url) as conn:
        conn.execute(delete(BASELINE_KERNEL_OP).where(BASELINE_KERNEL_OP.c.baseline_id == baseline_id))
        conn.execute(delete(BASELINE_KERNEL).where(BASELINE_KERNEL.c.baseline_id == baseline_id))
        conn.execute(delete(BASELINE).where(BASELINE.c.id == baseline_id))


def add_acceptance(engine: Engine, row: Acceptance, url: str = "") -> Acceptance:
    """Store an acknowledged regression; returns it with its id."""
    with write_transaction(engine, url) as conn:
        row.id = conn.execute(ACCEPTANCE.insert().values(**row.model_dump(exclude={"id"}))
                              .returning(ACCEPTANCE.c.id)).scalar_one()
    return row


def delete_acceptance(engine: Engine, acceptance_id: int, url: str = "") -> Acceptance:
    """Revoke one acceptance; returns what was removed."""
    found = EngineReader(engine).get_acceptance(acceptance_id)
    if found is None:
        raise InputError("no such acceptance in the store", field="acceptance", value=acceptance_id)
    with write_transaction(engine, url) as conn:
        conn.execute(delete(ACCEPTANCE).where(ACCEPTANCE.c.id == acceptance_id))
    return found


