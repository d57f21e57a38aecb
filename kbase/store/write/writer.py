"""Writing a baseline on the driver: the statements of ``write_sql`` (compiled from ``write_statements``) run on
a DB-API connection — Python's ``sqlite3`` or psycopg2, opened by ``create`` for a snapshot, or the one under a
SQLAlchemy connection (``queries``) — so one implementation writes on both paths, and a snapshot imports
neither SQLAlchemy nor SQLModel.

Values are bound as SQLAlchemy binds them (SQLModel's ``UTCDateTime``: aware datetimes in UTC, on SQLite as
``YYYY-MM-DD HH:MM:SS.ffffff``; SQLite booleans as 0/1; numpy scalars as Python numbers), so a row written here
is byte for byte the row the SQLAlchemy path wrote. The caller holds the transaction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from kbase.errors import StoreError
from kbase.store.schema.schema_names import name_hash
from kbase.store.write.write_sql import BASELINE_COLUMNS, SQL

if TYPE_CHECKING:
    from kbase.analysis.leaderboard import Leaderboard
    from kbase.store.codec.kernel_blobs import StoredTable
    from kbase.store.schema.records import BaselineRecord

NAME_CHUNK = 400  # names looked up per statement
PG_PAGE = 200  # rows per round trip of a PostgreSQL insert (psycopg2's execute_batch)
_LIST = re.compile(r"__\[POSTCOMPILE_(\w+)\]")  # an expanding IN list of the compiled text
CAPTURE_KEY = ("workload", "commit", "source_sha256", "window_spec", "capture_copy")
_PLAIN = frozenset({str, int, bytes, type(None)})  # bound as they are by both drivers


def _utc(value: datetime) -> datetime:
    if value.utcoffset() is None:  # as UTCDateTime refuses it
        raise ValueError("Datetime values must have timezone information")
    return value.astimezone(UTC)


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, datetime):
        d = _utc(value)
        return (f"{d.year:04d}-{d.month:02d}-{d.day:02d} {d.hour:02d}:{d.minute:02d}:{d.second:02d}"
                f".{d.microsecond:06d}")
    if isinstance(value, date):
        return value.isoformat()
    return _number(value)


def _pg_value(value: Any) -> Any:
    return _utc(value) if isinstance(value, datetime) else _number(value)


def _number(value: Any) -> Any:
    if value is None or isinstance(value, str | bytes | int):  # (a bool too: sqlite3 stores it as 0/1)
        return value
    if isinstance(value, float):
        return float(value)  # (numpy's float64 too)
    if hasattr(value, "item") and not isinstance(value, bytes | bytearray | memoryview):
        return value.item()  # a numpy scalar
    return value


class Writer:
    """The write statements on one DB-API connection (``dialect``: ``sqlite`` or ``postgresql``)."""

    def __init__(self, conn: Any, dialect: str) -> None:
        self.conn = conn
        self.dialect = dialect
        self._sql = SQL[dialect]
        self._value = _sqlite_value if dialect == "sqlite" else _pg_value

    def bind(self, name: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """Statement ``name``'s text and parameters: each list parameter one parameter per value (an empty list
        matches nothing), every value as SQLAlchemy binds it."""
        args = {k: v if isinstance(v, list) else self._value(v) for k, v in params.items()}
        sqlite = self.dialect == "sqlite"

        def expand(m: re.Match) -> str:
            key = m.group(1)
            values = args.pop(key)
            names = [f"{key}_{i}" for i in range(len(values))]
            args.update(zip(names, map(self._value, values)))
            return ", ".join(f":{n}" if sqlite else f"%({n})s" for n in names) or "NULL"

        return _LIST.sub(expand, self._sql[name]), args

    def rows(self, name: str, params: Mapping[str, Any]) -> list[tuple]:
        cur = self.conn.cursor()
        try:
            cur.execute(*self.bind(name, params))
            return [tuple(r) for r in cur.fetchall()]
        finally:
            cur.close()

    def many(self, name: str, rows: Sequence[Mapping[str, Any]]) -> None:
        if not rows:
            return
        value = self._value
        cur = self.conn.cursor()
        try:  # (names and ids, nearly always: bound as they are)
            args = [r if all(type(v) in _PLAIN for v in r.values()) else {k: value(v) for k, v in r.items()}
                    for r in rows]
            if self.dialect == "postgresql":
                from psycopg2.extras import execute_batch

                # psycopg2's executemany is one round trip per row; its execute_batch, one per page
                execute_batch(cur, self._sql[name], args, page_size=PG_PAGE)
            else:
                cur.executemany(self._sql[name], args)
        finally:
            cur.close()


# ------------------------------------------------------------------------------------------ names


def name_ids(w: Writer, kernels: list[tuple[str, str, str, str, str]]) -> dict[str, int]:
    """Ids of the kernel names, inserting those not yet known (race-safe upsert). ``kernels``: (name, family,
    short name, category, tc) of each kernel (``codec.kernel_naming``); a repeated name keeps its first."""
    first = {k[0]: k for k in reversed(kernels)}  # (reversed: the first of a repeated name wins)
    rows = [{"name_hash": name_hash(name), "name": name, "family_hash": name_hash(family), "family": family,
             "short_name": short, "category": category, "tc": tc}
            for name, family, short, category, tc in first.values()]
    return _upsert_names(w, "kernel_name", rows, "name")


def op_ids(w: Writer, ops: list[tuple[str, str]]) -> dict[str, int]:
    """Ids of the op keys ((key, op without scope) each), inserting those not yet known (as ``name_ids``)."""
    rows = [{"name_hash": name_hash(key), "key": key, "op": bare} for key, bare in dict(ops).items()]
    return _upsert_names(w, "op_name", rows, "key")


def _upsert_names(w: Writer, table: str, rows: list[dict[str, Any]], name: str) -> dict[str, int]:
    """``row[name]`` -> id of ``rows`` (each with its ``name_hash``) in a names table, inserting the missing ones."""
    # One global insert order: two writers adding overlapping new names in different (leaderboard) orders would
    # each wait on the other's uncommitted row — a deadlock on PostgreSQL.
    rows.sort(key=lambda row: row["name_hash"])
    ids: dict[str, int] = {}
    by_hash = {row["name_hash"]: row[name] for row in rows}
    for i in range(0, len(rows), NAME_CHUNK):
        chunk = rows[i : i + NAME_CHUNK]
        # Known names are only looked up: the insert is paid for new names only, which after the first baseline
        # of a workload is almost none.
        found: dict[str, int] = dict(w.rows(f"{table}_ids", {"hashes": [row["name_hash"] for row in chunk]}))
        missing = [row for row in chunk if row["name_hash"] not in found]
        if missing:
            w.many(f"insert_{table}s", missing)
            found.update(w.rows(f"{table}_ids", {"hashes": [row["name_hash"] for row in missing]}))
        for h, nid in found.items():
            ids[by_hash[h]] = int(nid)
    return ids


def write_kernels(w: Writer, workload: str, tables: list[tuple[int, StoredTable]]) -> None:
    """The one writer of kernel tables (a snapshot, an import, the synthetic bulk history, migration 0014):
    each (baseline id, ``kernel_blobs.StoredTable``) as its ``baseline_kernels`` row, its blobs as they are, the
    names and op keys it lists mapped to this store's ids (inserted when new) beside them (``kernel_ids``,
    ``op_ids``), and the workload's new ``workload_kernel`` pairs."""
    from kbase.store.codec.id_lists import id_list
    from kbase.store.codec.kernel_blobs import FORMAT

    ids = name_ids(w, [n for _, t in tables for n in t.names])
    ops = op_ids(w, [o for _, t in tables for o in t.op_names])
    rows = [{"baseline_id": bid, "format": FORMAT, "kernels": len(t.names),
             "kernel_ids": id_list([ids[n[0]] for n in t.names]), "levels": t.blobs.levels, "board": t.blobs.board,
             "samples": t.blobs.samples, "sketches": t.blobs.sketches,
             "op_ids": None if t.ops is None else id_list([ops[k] for k, _ in t.op_names]), "ops": t.ops}
            for bid, t in tables]
    w.many("insert_baseline_kernels", rows)
    used = sorted({ids[n[0]] for _, t in tables for n in t.names})
    if used:
        known = {r[0] for r in w.rows("workload_kernel_ids", {"workload": workload})}
        w.many("insert_workload_kernels", [{"workload": workload, "name_id": i} for i in used if i not in known])


# ------------------------------------------------------------------------------------------ a baseline


@dataclass(frozen=True)
class Written:
    """What ``save_baseline`` did: ``created`` a row (``id``, ``capture_copy``), or found the capture stored
    (``row``: the stored baseline's columns, ``BASELINE_COLUMNS``)."""

    created: bool
    id: int
    capture_copy: int = 0
    row: tuple | None = None


def save_baseline(w: Writer, lb: Leaderboard, values: dict[str, Any], *, force: bool = False,
                  duplicate_first: bool = False) -> Written:
    """Store the baseline row ``values`` (``codec.baseline_values``) and the kernel table of ``lb``, at most once
    per capture: the unique capture key decides, so concurrent identical snapshots store one row; ``force``:
    another copy (the next copy number). ``duplicate_first``: a baseline of the same bytes, window and commit
    (any copy) is answered first, as ``reader.find_duplicate`` (unless ``force``). In the caller's transaction."""
    from kbase.store.codec.codec import stored_table

    if duplicate_first and not force:
        dup = w.rows("duplicate_baseline", {"workload": values["workload"], "commit": values["commit"],
                                            "sha256": values["source_sha256"], "window_spec": values["window_spec"]})
        if dup:
            return Written(False, int(dup[0][0]), row=dup[0])
    key = {k: values[k] for k in CAPTURE_KEY[:-1]}
    baseline_id = None
    for _ in range(20):  # a concurrent --force took this copy number: take the next
        values["capture_copy"] = _next_copy(w, key) if force else 0
        got = w.rows("insert_baseline", values)
        baseline_id = int(got[0][0]) if got else None
        if baseline_id is not None or not force:
            break
    if baseline_id is None:
        existing = w.rows("same_capture", key)
        if not existing or force:
            raise StoreError("store: the capture key is taken but its row cannot be read; try again")
        return Written(False, int(existing[0][0]), row=existing[0])
    write_kernels(w, values["workload"], [(baseline_id, stored_table(lb, [int(k) for k in lb.summary.iteration_keys]))])
    return Written(True, baseline_id, values["capture_copy"])


def _next_copy(w: Writer, key: dict[str, Any]) -> int:
    top = w.rows("next_copy", key)[0][0]
    return 0 if top is None else int(top) + 1


def record_of(row: tuple) -> BaselineRecord:
    """A stored baseline row (``BASELINE_COLUMNS``, as the driver returns it) as a read-only record."""
    from kbase.store.schema.records import BaselineRecord, utc_datetime

    values = dict(zip(BASELINE_COLUMNS, row))
    for k in ("created_at", "commit_date"):
        v = values[k]
        values[k] = v.astimezone(UTC) if isinstance(v, datetime) else utc_datetime(v)
    for k in ("detached", "dirty", "aligned"):
        values[k] = bool(values[k])
    return BaselineRecord(**values)


def written_record(values: dict[str, Any], written: Written) -> BaselineRecord:
    """The record of the baseline ``save_baseline`` stored (``written.created``) or found."""
    from kbase.store.schema.records import BaselineRecord

    if written.row is not None:
        return record_of(written.row)
    row = {**values, "id": written.id, "capture_copy": written.capture_copy}
    row["created_at"] = _utc(row["created_at"])
    if row["commit_date"] is not None:
        row["commit_date"] = _utc(row["commit_date"])
    return BaselineRecord(**{k: row[k] for k in BASELINE_COLUMNS})
