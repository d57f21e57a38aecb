"""The read-only SQLite path: the store's reads (``reader.StoreReader``: ``kbase list``, ``show @ID``,
``history``, and the store reads of ``diff`` and ``gate``) on Python's own ``sqlite3``.

Why: importing SQLAlchemy and SQLModel costs ~0.4-0.6 s (pandas another ~0.6 s), more than the whole
answer of these commands on a store of 10,000 baselines. The SQL is not written here: it is the SQLite text
of the same SQLAlchemy statements the other path runs (``statements``, compiled into ``read_sql``), with the
same parameters. SQLModel and Alembic stay the schema's source of truth: this path reads only a store that
already is exactly at the head revision (``schema_names.head_revision``) and holds only kbase's own tables
(the rule of ``guard``), through a read-only connection (``mode=ro``: nothing is created, migrated or
written). In every other case — no store, a foreign database, an older or newer schema, PostgreSQL,
in-memory SQLite, a URL with options, a file that is locked or cannot be read — ``read_only`` returns None
and the caller takes the SQLAlchemy path, with its messages and exit codes.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Mapping
from datetime import date
from typing import Any, TypeVar

from kbase.store.guard import _sqlite_tables
from kbase.store.read_sql import SQL
from kbase.store.reader import StoreReader
from kbase.store.readonly import connect_store
from kbase.store.records import (  # noqa: F401 - BASELINE_FIELDS, BaselineRecord, Unreadable: re-exported
    BASELINE_FIELDS,
    AcceptanceRecord,
    BaselineRecord,
    Unreadable,
    acceptance_record,
    baseline_record,
    utc_datetime,
)
from kbase.store.schema_names import OWN_TABLES, SQLITE_INTERNAL_TABLES, head_revision
from kbase.store_urls import sqlite_path

T = TypeVar("T")
_LIST = re.compile(r"__\[POSTCOMPILE_(\w+)\]")  # an expanding IN list of the compiled text


def bind(sql: str, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The compiled text and parameters for sqlite3: each list parameter becomes one named parameter per
    value (as SQLAlchemy expands it; an empty list matches nothing), a date its ISO text (SQLAlchemy's
    SQLite DATE)."""
    args = {k: v.isoformat() if isinstance(v, date) else v for k, v in params.items()}

    def expand(m: re.Match) -> str:
        key = m.group(1)
        values = args.pop(key)
        names = [f"{key}_{i}" for i in range(len(values))]
        args.update(zip(names, values))
        return ", ".join(f":{n}" for n in names) or "NULL"

    return _LIST.sub(expand, sql), args


class SqliteReader(StoreReader[BaselineRecord, AcceptanceRecord]):
    """The store's reads on one read-only sqlite3 connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def close(self) -> None:
        self.conn.close()

    def rows(self, statement: str, params: Mapping[str, Any]) -> list[tuple]:
        return self.conn.execute(*bind(SQL[statement], params)).fetchall()

    def _baseline(self, row: tuple) -> BaselineRecord:
        return baseline_record(row)

    def _acceptance(self, row: tuple) -> AcceptanceRecord:
        return acceptance_record(row)

    def _when(self, value: Any):
        return utc_datetime(value)


def open_reader(url: str, busy_timeout_s: float | None = None) -> SqliteReader | None:
    """A read-only reader of the store at ``url`` when this path may read it (see the module's doc), else None."""
    path = sqlite_path(url)
    if path is None or not url.startswith("sqlite:///") or "?" in url:
        return None
    try:
        if not path.is_file():
            return None
        # The tables first, as the guard reads them (immutable: a read-only connection to a WAL database
        # would create its -wal/-shm beside another application's file).
        tables = _sqlite_tables(path)
        if tables - OWN_TABLES - SQLITE_INTERNAL_TABLES or not OWN_TABLES <= tables:
            return None  # another application's database, or a store being created: the guarded path
        conn = connect_store(path, 30.0 if busy_timeout_s is None else busy_timeout_s)  # (read-only media too)
    except (OSError, ValueError, sqlite3.Error):
        return None
    try:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        conn.close()
        return None
    if len(rows) != 1 or rows[0][0] != head_revision():
        conn.close()
        return None  # older (to migrate) or newer (refused) schema: the Alembic path says which
    return SqliteReader(conn)


def read_only(url: str, busy_timeout_s: float | None, fn: Callable[[SqliteReader], T]) -> T | None:
    """``fn(reader)`` on the read-only path, or None when that path does not apply or a read fails (the
    caller then asks the SQLAlchemy path, which reports the problem as it always has).
    ``KBASE_NO_FAST_READ=1`` turns the path off (tests compare both paths' output)."""
    import os

    if os.environ.get("KBASE_NO_FAST_READ", "") not in ("", "0"):
        return None
    reader = open_reader(url, busy_timeout_s)
    if reader is None:
        return None
    try:
        return fn(reader)
    except (sqlite3.Error, Unreadable):
        return None
    finally:
        reader.close()
