"""Writing the store (SQLAlchemy Core over the SQLModel tables), and a stored leaderboard as the DataFrame
``build_leaderboard`` made. Every read is ``reader.StoreReader``'s (the one read layer).

Writes are single transactions (``write_transaction``): a baseline and all its rows, or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select

from kbase.errors import InputError, KbaseError, StoreError
from kbase.store.codec import baseline_row, kernel_naming, kernels_row, leaderboard_from_table, name_hash
from kbase.store.engine import write_transaction
from kbase.store.models import (
    ACCEPTANCE,
    BASELINE,
    BASELINE_KERNELS,
    KERNEL_NAME,
    OP_NAME,
    WORKLOAD_KERNEL,
    Acceptance,
    Baseline,
)
from kbase.store.reader import EngineReader

if TYPE_CHECKING:
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
    return _upsert_names(conn, KERNEL_NAME, rows, "name")


def op_ids(conn: Connection, ops: list[tuple[str, str]]) -> dict[str, int]:
    """Ids of the op keys ((key, op without scope) each), inserting those not yet known (as ``name_ids``)."""
    rows = [{"name_hash": name_hash(key), "key": key, "op": bare} for key, bare in dict(ops).items()]
    return _upsert_names(conn, OP_NAME, rows, "key")


def _upsert_names(conn: Connection, table: Any, rows: list[dict[str, Any]], name: str) -> dict[str, int]:
    """``row[name]`` -> id of ``rows`` (each with its ``name_hash``) in a names table, inserting the missing ones."""
    insert = _insert(conn)
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
        found: dict[str, int] = dict(conn.execute(select(table.c.name_hash, table.c.id)
                                                  .where(table.c.name_hash.in_(hashes))).all())
        missing = [row for row in chunk if row["name_hash"] not in found]
        if missing:
            conn.execute(insert(table).on_conflict_do_nothing(index_elements=["name_hash"]), missing)
            new = [row["name_hash"] for row in missing]
            found.update(conn.execute(select(table.c.name_hash, table.c.id).where(table.c.name_hash.in_(new))).all())
        for h, nid in found.items():
            ids[by_hash[h]] = nid
    return ids


def insert_kernels(conn: Connection, workload: str, rows: list[dict[str, Any]]) -> None:
    """Kernel tables (``codec.kernels_row``) of baselines of ``workload``, and the workload's new kernel names."""
    from kbase.store.packed import Packed

    conn.execute(BASELINE_KERNELS.insert(), rows)
    used = sorted({i for r in rows for i in Packed(r["levels"]).ints("name_id")})
    if used:
        known = {r[0] for r in conn.execute(select(WORKLOAD_KERNEL.c.name_id)
                                            .where(WORKLOAD_KERNEL.c.workload == workload))}
        new = [{"workload": workload, "name_id": i} for i in used if i not in known]
        if new:
            conn.execute(_insert(conn)(WORKLOAD_KERNEL).on_conflict_do_nothing(), new)


def _insert(conn: Connection) -> Any:
    """The dialect's INSERT (with ON CONFLICT)."""
    from sqlalchemy.dialects.postgresql import insert as pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return pg_insert if conn.dialect.name == "postgresql" else sqlite_insert


CAPTURE_KEY = ("workload", "commit", "source_sha256", "window_spec", "capture_copy")


@dataclass(frozen=True)
class Saved:
    baseline: Baseline
    created: bool  # False: this capture was already stored at this commit (the stored row is returned)


def save_leaderboard(engine: Engine, lb: Leaderboard, *, workload: str, commit: CommitInfo, source: SourceInfo,
                     window_spec: str, tags: list[str] | None = None, note: str = "", url: str = "",
                     force: bool = False, kind: str = "snapshot") -> Saved:
    """Store one leaderboard as a baseline, atomically and at most once per capture: the unique capture
    key (workload, commit, sha256, window, copy) decides, so concurrent identical snapshots store one row.
    ``force`` stores another copy (the next copy number) of a capture already stored."""
    base = baseline_row(lb, workload=workload, commit=commit, source=source, window_spec=window_spec, tags=tags,
                        note=note, kind=kind)
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
            ops = None if lb.ops is None else op_ids(conn, list(zip(lb.ops.names.tolist(), lb.ops.bare.tolist())))
            insert_kernels(conn, workload, [kernels_row(baseline_id, lb, name_ids(conn, kernel_naming(lb)), keys,
                                                        ops)])
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
    return (_insert(conn)(BASELINE).values(**values).on_conflict_do_nothing(index_elements=list(CAPTURE_KEY))
            .returning(BASELINE.c.id))


def _same_capture(conn: Connection, values: dict[str, Any]) -> Baseline | None:
    res = conn.execute(select(BASELINE).where(*_capture_where(values), BASELINE.c.capture_copy == 0))
    row = res.fetchone()
    return Baseline(**dict(zip(res.keys(), row))) if row is not None else None


def load_leaderboard(engine: Engine, baseline_id: int) -> Leaderboard:
    """The stored Leaderboard of a baseline, as ``build_leaderboard`` made it."""
    reader = EngineReader(engine)
    b = reader.baseline(baseline_id)
    t = reader.kernel_table(baseline_id)
    return leaderboard_from_table(b, t, reader.names(t.name_id.tolist()))


def delete_baseline(engine: Engine, baseline_id: int, url: str = "") -> None:
    EngineReader(engine).baseline(baseline_id)  # an InputError naming @ID when there is none
    with write_transaction(engine, url) as conn:
        conn.execute(delete(BASELINE_KERNELS).where(BASELINE_KERNELS.c.baseline_id == baseline_id))
        conn.execute(delete(BASELINE).where(BASELINE.c.id == baseline_id))


def delete_baselines(engine: Engine, baseline_ids: list[int], url: str = "") -> None:
    """Delete several baselines in one transaction (``kbase prune``): all of them, or none."""
    with write_transaction(engine, url) as conn:
        for i in range(0, len(baseline_ids), 500):
            chunk = baseline_ids[i : i + 500]
            conn.execute(delete(BASELINE_KERNELS).where(BASELINE_KERNELS.c.baseline_id.in_(chunk)))
            conn.execute(delete(BASELINE).where(BASELINE.c.id.in_(chunk)))


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


