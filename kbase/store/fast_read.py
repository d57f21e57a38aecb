"""The read-only fast path: the store's reads (``reader.StoreReader``: ``kbase list``, ``show @ID``,
``history``, ``steps`` and the store reads of ``diff`` and ``gate``) on a plain database connection, with
no SQLAlchemy, SQLModel or pandas.

Why: importing SQLAlchemy and SQLModel costs ~0.4-0.6 s (pandas another ~0.6 s), more than the whole
answer of these commands on a store of 10,000 baselines. The SQL is not written here: it is the text of
the same SQLAlchemy statements the other path runs (``statements``, compiled for each dialect into
``read_sql``), with the same parameters. SQLModel and Alembic stay the schema's source of truth: this path
reads only a store that already is exactly at the head revision (``schema_names.head_revision``), read-only.
Two connections answer: ``sqlite_read`` (Python's sqlite3, a SQLite file holding only kbase's tables) and
``pg_read`` (libpq, PostgreSQL). In every other case — no store, a foreign database, an older or newer
schema, in-memory SQLite, another driver, a URL either connection does not take, a server that cannot be
reached, a read that fails — ``read_only`` returns None and the caller takes the SQLAlchemy path, with its
messages and exit codes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

from kbase.store.reader import StoreReader
from kbase.store.records import (
    AcceptanceRecord,
    BaselineRecord,
    Unreadable,
    acceptance_record,
    baseline_record,
    utc_datetime,
)

T = TypeVar("T")


class FastReader(StoreReader[BaselineRecord, AcceptanceRecord]):
    """The store's reads on one read-only connection, as plain records (``records``). A subclass runs a
    statement's compiled text (``rows``), closes its connection and names the errors a failed read raises
    (``errors``: the caller then falls back to the SQLAlchemy path)."""

    errors: tuple[type[Exception], ...] = ()

    def close(self) -> None:
        raise NotImplementedError

    def _baseline(self, row: tuple) -> BaselineRecord:
        return baseline_record(row)

    def _acceptance(self, row: tuple) -> AcceptanceRecord:
        return acceptance_record(row)

    def _when(self, value: Any):
        return utc_datetime(value)


def open_reader(url: str, busy_timeout_s: float | None = None) -> FastReader | None:
    """A read-only reader of the store at ``url`` when the fast path may read it (see the module's doc),
    else None."""
    if url.startswith("sqlite:"):
        from kbase.store import sqlite_read

        return sqlite_read.open_reader(url, busy_timeout_s)
    if url.startswith("postgresql+psycopg:"):
        from kbase.store import pg_read

        return pg_read.open_reader(url)
    return None


def read_only(url: str, busy_timeout_s: float | None, fn: Callable[[FastReader], T]) -> T | None:
    """``fn(reader)`` on the read-only path, or None when that path does not apply or a read fails (the
    caller then asks the SQLAlchemy path, which reports the problem as it always has).
    ``KBASE_NO_FAST_READ=1`` turns the path off (tests compare both paths' output)."""
    if os.environ.get("KBASE_NO_FAST_READ", "") not in ("", "0"):
        return None
    reader = open_reader(url, busy_timeout_s)
    if reader is None:
        return None
    failed: tuple[type[Exception], ...] = (*reader.errors, Unreadable)
    try:
        return fn(reader)
    except failed:
        return None
    finally:
        reader.close()
