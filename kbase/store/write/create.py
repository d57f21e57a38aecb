"""A store opened on the driver for ``kbase snapshot`` — Python's ``sqlite3``, or psycopg2 — without SQLAlchemy,
SQLModel or Alembic (~0.4 s of a 1M-launch snapshot), and a new store created the same way.

- A store at the head revision (its ``alembic_version`` stamp read with the driver, kbase's tables present) is
  written as it is (``writer``).
- A new one (a SQLite file not there yet or without tables, a PostgreSQL schema without tables) is created from
  the head schema's DDL (``write_sql``, compiled from ``SQLModel.metadata``; a test holds it equal to what
  ``alembic upgrade head`` makes) and stamped at the head revision, in one transaction, under the lock the
  migrations take (``engine._schema_lock``: a lock file beside a SQLite store, PostgreSQL's advisory lock), so
  eight CI jobs creating one store at once create it once.
- Anything else — an older or newer stamp, a damaged one, another application's database, in-memory SQLite, a
  URL with options, another driver, ``KBASE_NO_DIRECT_WRITE=1`` — is ``None``: the caller opens the store through
  ``engine.open_store`` as before, which migrates, refuses or reports it in its own words.

A PostgreSQL connection is opened as every read's (``connect.pg_connect``: the URL as SQLAlchemy reads it, the
settings' connect timeout, psycopg2's message with the password masked); the store's reads on it are the one
reader's (``DirectStore.reader``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from kbase.errors import KbaseError, StoreError
from kbase.store.read.connect import PG_SCHEME, driver_error
from kbase.store.schema.schema_names import OWN_TABLES, SCHEMA_LOCK, SQLITE_INTERNAL_TABLES, head_revision
from kbase.store.write.write_sql import DDL, REVISION
from kbase.store.write.writer import Writer, Written, save_baseline
from kbase.store_urls import sqlite_path

if TYPE_CHECKING:
    from kbase.analysis.leaderboard import Leaderboard
    from kbase.settings import Settings
    from kbase.store.read.reader import StoreReader

SWITCH = "KBASE_NO_DIRECT_WRITE"  # 1: every write through SQLAlchemy (engine.open_store), as before
_STAMP = {"sqlite": "INSERT INTO alembic_version (version_num) VALUES (?)",
          "postgresql": "INSERT INTO alembic_version (version_num) VALUES (%s)"}
_PG_TABLES = ("SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
              "WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p')")  # (SQLAlchemy's get_table_names)


class DirectStore:
    """An open store on a DB-API connection (``dialect``: ``sqlite`` or ``postgresql``); close it when done."""

    def __init__(self, conn: Any, dialect: str, url: str) -> None:
        self.conn, self.dialect, self.url = conn, dialect, url
        self.writer = Writer(conn, dialect)

    @property
    def reader(self) -> StoreReader:
        """The store's reads (``reader.StoreReader``) on this connection."""
        from kbase.store.read.reader import StoreReader

        return StoreReader(self.conn, self.dialect, self.url)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()

    def __enter__(self) -> DirectStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction; on SQLite it takes the write lock up front (BEGIN IMMEDIATE), so concurrent writers
        queue on the busy timeout. A driver error becomes one line (``errors.store_error``)."""
        from kbase.store.schema.errors import store_error

        try:  # (both connections are autocommit: the transaction is the statements' own)
            self._run("BEGIN IMMEDIATE" if self.dialect == "sqlite" else "BEGIN")
            try:
                yield
            except BaseException:
                with contextlib.suppress(Exception):  # (a connection Ctrl-C closed: the interrupt is the news)
                    self._run("ROLLBACK")
                raise
            self._run("COMMIT")
        except Exception as exc:
            if driver_error(exc):
                raise store_error(self.url, exc) from None
            raise

    def save(self, lb: Leaderboard, values: dict[str, Any], *, force: bool = False) -> Written:
        """``writer.save_baseline`` in one transaction (a baseline of the same bytes, window and commit found
        first answers, as ``api.capture._save`` has it); a failure is one line and stores nothing."""
        try:
            with self.transaction():
                return save_baseline(self.writer, lb, values, force=force, duplicate_first=True)
        except KbaseError:
            raise
        except Exception as exc:  # noqa: BLE001 - the transaction rolled back
            raise StoreError(f"store: could not save the baseline ({type(exc).__name__}: {exc})") from None

    def _run(self, sql: str) -> None:
        cur = self.conn.cursor()
        try:
            cur.execute(sql)
        finally:
            cur.close()

    def rows(self, sql: str, params: tuple = ()) -> list[tuple]:
        cur = self.conn.cursor()
        try:
            cur.execute(sql, params)
            return [tuple(r) for r in cur.fetchall()]
        finally:
            cur.close()

    def state(self) -> str:
        """``head`` (stamped at the head revision, kbase's tables there), ``empty`` (no table at all) or
        ``other`` (anything else: the SQLAlchemy path's to judge)."""
        if self.dialect == "sqlite":
            tables = {r[0] for r in self.rows("SELECT name FROM sqlite_master WHERE type = 'table'")}
            tables -= SQLITE_INTERNAL_TABLES
        else:
            tables = {r[0] for r in self.rows(_PG_TABLES)}
        if not tables:
            return "empty"
        stamped = [r[0] for r in self.rows("SELECT version_num FROM alembic_version")] \
            if "alembic_version" in tables else []
        return "head" if stamped == [head_revision()] and OWN_TABLES <= tables else "other"

    def create(self) -> bool:
        """Create the head schema in this empty database and stamp it, in one transaction; False (nothing done)
        when the compiled DDL is not of this installation's head revision."""
        if REVISION != head_revision():
            return False
        with self.transaction():
            cur = self.conn.cursor()
            try:
                for ddl in DDL[self.dialect]:
                    cur.execute(ddl)
                cur.execute(_STAMP[self.dialect], (REVISION,))
            finally:
                cur.close()
        return True


def open_direct(settings: Settings, *, create: bool = True) -> DirectStore | None:
    """The settings' store on the driver, at the head schema (``create``: a new one created), or None where the
    SQLAlchemy path must open it (see the module's docstring). Raises a ``StoreError`` (one line) for what that
    path refuses alike: a store location that cannot be, another application's database, a server that cannot
    be reached."""
    if os.environ.get(SWITCH, "").strip().lower() in ("1", "true", "yes", "on"):
        return None
    url = settings.store_url()
    store = _connect(url, settings.busy_timeout_s, settings.connect_timeout_s, create)
    if store is None:
        return None
    try:
        if _ready(store, url, create):
            return store
    except Exception as exc:
        store.close()
        if driver_error(exc):
            from kbase.store.schema.errors import store_error

            raise store_error(url, exc) from None
        raise
    store.close()
    return None


def _ready(store: DirectStore, url: str, create: bool) -> bool:
    state = store.state()
    if state == "head":
        return True
    if state == "other" and store.dialect == "postgresql":  # another application's tables: refused as that path does
        from kbase.store.schema.guard import _refuse_foreign
        from kbase.store_urls import mask_url

        _refuse_foreign(mask_url(url), {r[0] for r in store.rows(_PG_TABLES)})
    if state != "empty" or not create:
        return False
    with _creation_lock(store, url):
        state = store.state()  # another process may have created it meanwhile
        if state == "empty":
            return store.create()
        return state == "head"


@contextlib.contextmanager
def _creation_lock(store: DirectStore, url: str) -> Iterator[None]:
    """The lock the migrations take (``engine._schema_lock``)."""
    if store.dialect == "postgresql":
        store.rows("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        try:
            yield
        finally:
            store.rows("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK,))
        return
    from kbase.store.schema.guard import _file_lock

    path = sqlite_path(url)
    assert path is not None
    with _file_lock(path.with_name(path.name + ".migrate-lock")):
        yield


def _connect(url: str, busy_timeout_s: float | None, connect_timeout_s: float, create: bool) -> DirectStore | None:
    path = sqlite_path(url)
    if path is not None:
        if not url.startswith("sqlite:///") or "?" in url:
            return None  # in memory, or options the SQLAlchemy URL carries
        from kbase.store.engine import BUSY_TIMEOUT_S, _set_pragmas, prepare_store_folder
        from kbase.store.schema.errors import store_error
        from kbase.store.schema.guard import check_sqlite_file, check_store_location

        check_store_location(path)
        check_sqlite_file(path)  # another application's database: refused untouched
        if not path.exists() and not create:
            return None
        prepare_store_folder(path)
        import sqlite3

        busy = BUSY_TIMEOUT_S if busy_timeout_s is None else busy_timeout_s
        try:
            conn = sqlite3.connect(path, timeout=busy, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise store_error(url, exc) from None
        store = DirectStore(conn, "sqlite", url)
        try:
            _set_pragmas(conn, busy)
        except sqlite3.Error as exc:
            store.close()
            raise store_error(url, exc) from None
        return store
    if not url.startswith(PG_SCHEME + "://"):
        return None
    from kbase.store.read.connect import pg_connect

    return DirectStore(pg_connect(url, connect_timeout_s), "postgresql", url)
