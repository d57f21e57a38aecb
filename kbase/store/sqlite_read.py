"""The read-only path's SQLite connection (``fast_read``): the statements' SQLite text (``read_sql``) on
Python's own ``sqlite3``, through a read-only connection (``mode=ro``: nothing is created, migrated or
written) to a file that holds only kbase's tables (the rule of ``guard``) at the head revision. Anything
else — a foreign database, another schema, in-memory SQLite, a URL with options, a file that is locked or
cannot be read — is left to the SQLAlchemy path (``open_reader`` returns None).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Mapping
from datetime import date
from typing import Any

from kbase.store.fast_read import FastReader
from kbase.store.guard import _sqlite_tables
from kbase.store.read_sql import SQL
from kbase.store.readonly import connect_store
from kbase.store.schema_names import OWN_TABLES, SQLITE_INTERNAL_TABLES, head_revision
from kbase.store_urls import sqlite_path

_LIST = re.compile(r"__\[POSTCOMPILE_(\w+)\]")  # an expanding IN list of the compiled text
_TEXT = SQL["sqlite"]


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


class SqliteReader(FastReader):
    """The store's reads on one read-only sqlite3 connection."""

    errors = (sqlite3.Error,)

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def close(self) -> None:
        self.conn.close()

    def rows(self, statement: str, params: Mapping[str, Any]) -> list[tuple]:
        return self.conn.execute(*bind(_TEXT[statement], params)).fetchall()


def open_reader(url: str, busy_timeout_s: float | None = None) -> SqliteReader | None:
    """A read-only reader of the SQLite store at ``url`` when this path may read it, else None."""
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
