"""How the store is opened, migrated and guarded. Where it lives comes from ``Settings.store_url()``
(``--db``, ``KBASE_DB``, ``[tool.kbase] db``, else ``.kbase/kbase.db`` at the git top level).
A plain path means SQLite; ``postgresql://`` (and psycopg 3's ``postgresql+psycopg://``) is read as
``postgresql+psycopg2://``.

An open ``Store`` reads through its one reader (``reader.StoreReader``: the generated statements on a DB-API
connection, ``connect``) and writes and migrates through SQLAlchemy (``engine``). SQLite runs in WAL mode with
a busy timeout so parallel CI jobs can write at once. The schema is Alembic's: a new database is upgraded to
head on first use, an older one is upgraded, and one from a newer kbase is refused untouched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kbase.errors import StoreError
from kbase.store.schema.errors import store_error
from kbase.store.schema.guard import (
    _file_lock,
    check_server_database,
    check_sqlite_file,
    check_stamp,
    check_store_location,
)
from kbase.store.schema.schema_names import SCHEMA_LOCK, head_revision, migrations_dir
from kbase.store_urls import is_memory, mask_url, normalize_url, sqlite_path

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from kbase.settings import Settings
    from kbase.store.read.reader import StoreReader

T = TypeVar("T")

BUSY_TIMEOUT_S = 30.0  # default; Settings.busy_timeout_s (KBASE_BUSY_TIMEOUT) sets it per store
CONNECT_TIMEOUT_S = 10.0  # default; Settings.connect_timeout_s (KBASE_CONNECT_TIMEOUT)
PG_URL = "postgresql+psycopg2://"  # (store_urls.normalize_url: every PostgreSQL URL reads so)


def alembic_config(url: str):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _sqlite_pragmas(busy_timeout_s: float):
    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        _set_pragmas(dbapi_conn, busy_timeout_s)

    return on_connect


def _set_pragmas(dbapi_conn: Any, busy_timeout_s: float) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
    cur.execute("PRAGMA foreign_keys = ON")
    try:
        cur.execute("PRAGMA journal_mode = WAL")
    except Exception:  # noqa: BLE001 - a read-only file cannot switch modes; reads still work
        pass
    cur.execute("PRAGMA synchronous = NORMAL")
    cur.close()


_ENGINES: list = []  # engines made by this process, closed by dispose_all() when a command ends


def dispose_all() -> None:
    while _ENGINES:
        _ENGINES.pop().dispose()


def make_engine(url: str, busy_timeout_s: float | None = None, connect_timeout_s: float | None = None) -> Engine:
    from sqlalchemy import create_engine, event

    busy = BUSY_TIMEOUT_S if busy_timeout_s is None else busy_timeout_s
    url = normalize_url(url) if url.startswith("postgres") else url
    path = sqlite_path(url)
    if path is not None:
        check_store_location(path)
        check_sqlite_file(path)
        prepare_store_folder(path)
        engine = create_engine(url, connect_args={"timeout": busy})
        event.listen(engine, "connect", _sqlite_pragmas(busy))
    else:
        connect_args = _pg_timeout(url, connect_timeout_s)  # (a URL it cannot read: its own line)
        try:
            engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args)
        except Exception as exc:  # noqa: BLE001 - bad dialect / missing driver
            raise StoreError(f"store {mask_url(url)}: cannot be used ({type(exc).__name__}: "
                             f"{mask_url(str(exc), secret_of=url)})") from None
        if url.startswith(PG_URL):
            from kbase.store.read.pg_driver import use_psycopg2

            use_psycopg2()  # (its connections read blobs, wait and time out as the read connection's do)
    _ENGINES.append(engine)
    return engine


def prepare_store_folder(path: Path) -> None:
    """The folder of a SQLite store not created yet (kbase's own ``.kbase``: with a ``.gitignore``)."""
    if not path.exists():
        created = not path.parent.exists()
        _make_parent(path)
        if created and path.parent.name == ".kbase":  # kbase's own folder: never shows in `git status`
            (path.parent / ".gitignore").write_text("# created by kbase\n*\n", encoding="utf-8")


def _pg_timeout(url: str, seconds: float | None) -> dict[str, Any]:
    """The connect timeout of a PostgreSQL engine: the read connection's (``connect.connect_timeout``)."""
    if "postgresql" not in url:
        return {}
    from kbase.store.read.connect import PG_SCHEME, connect_timeout, pg_connect_args

    given = pg_connect_args(url) if url.startswith(PG_SCHEME + "://") else {}
    return {"connect_timeout": connect_timeout(given, CONNECT_TIMEOUT_S if seconds is None else seconds)}


def _make_parent(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"store {path}: cannot create its directory {path.parent} ({exc.strerror})") from None


@contextlib.contextmanager
def _schema_lock(engine, url: str):
    """Serialise migrations between processes (8 CI jobs opening a new store at once)."""
    path = sqlite_path(url)
    if path is not None:
        with _file_lock(path.with_name(path.name + ".migrate-lock")):
            yield None
        return
    if is_memory(url):  # private to this process: nothing to serialise
        yield None
        return
    from sqlalchemy import text

    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(:key)"), {"key": SCHEMA_LOCK})
        try:
            yield None
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": SCHEMA_LOCK})
            conn.commit()


def schema_state(engine, url: str) -> tuple[str | None, str, set[str]]:
    """(current revision or None, head revision, known revisions)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config(url))
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    known = {rev.revision for rev in script.walk_revisions()}
    return current, script.get_current_head() or "", known


def _stamped_revisions(engine) -> list | None:
    """The rows of the store's Alembic version table by a plain query (None when there is none, or it
    cannot be read); a store that cannot be reached raises the driver's error."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    with engine.connect() as conn:  # (a store that cannot be reached says so now: one wait, not one per step)
        try:
            return [r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version")).fetchall()]
        except SQLAlchemyError:
            return None


def _stamped_revision(engine) -> str | None:
    """The store's one stamped revision (None: no version table, an empty one or several rows)."""
    stamped = _stamped_revisions(engine)
    return stamped[0] if stamped and len(stamped) == 1 else None


def upgrade(engine, url: str, revision: str = "head") -> None:
    from alembic import command

    cfg = alembic_config(url)
    before = _stamped_revision(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    reclaim_space(engine, url, before, _stamped_revision(engine))


def reclaim_space(engine, url: str, before: str | None, after: str | None) -> bool:
    """VACUUM a SQLite store whose upgrade from ``before`` to ``after`` passed a revision that empties most of
    its pages (``schema_names.RECLAIM_REVISIONS``; 0009: kernel rows to blobs, ~10x smaller; 0014: the kernel
    tables rebuilt). A dropped table's pages only go to SQLite's free list, and VACUUM cannot run inside the
    migration's transaction. False when nothing was to do or the store is busy (the free pages are then reused
    by later snapshots)."""
    from sqlalchemy.exc import SQLAlchemyError

    from kbase.store.schema.schema_names import RECLAIM_REVISIONS

    if sqlite_path(url) is None or is_memory(url) or before is None or after is None:
        return False
    if not any(before < r <= after for r in RECLAIM_REVISIONS):
        return False
    try:
        with engine.connect() as conn:
            conn.execution_options(isolation_level="AUTOCOMMIT").exec_driver_sql("VACUUM")
    except SQLAlchemyError:
        return False
    return True


class Store:
    """An open baseline store: its URL (masked in every message), its one reader (``reader``: the generated
    statements on one DB-API connection) and, for writes and migrations, its SQLAlchemy engine (``engine``; a
    store opened for reading makes one only when written to). Close it when done (``with open_store(...) as
    store:``) so no connection outlives the command."""

    def __init__(self, url: str, engine: Engine | None = None, connection: Any = None, *,
                 busy_timeout_s: float | None = None, connect_timeout_s: float | None = None) -> None:
        self.url = url
        self._engine = engine
        self._connection = connection  # the reader's, opened for reading (``connect.open_read``)
        self._raw: Any = None  # ... or one of the engine's, checked out for the reader
        self._reader: StoreReader | None = None
        self._timeouts = (busy_timeout_s, connect_timeout_s)

    @property
    def display_url(self) -> str:
        return mask_url(self.url)

    @property
    def engine(self) -> Engine:
        if self._engine is None:  # a store opened for reading, now written to: the usual checks, migrated
            self._engine = _open_engine(self.url, *self._timeouts, migrate=True)
        return self._engine

    @property
    def reader(self) -> StoreReader:
        """The store's reads (``reader.StoreReader``) on this store's one read connection."""
        if self._reader is None:
            from kbase.store.read.reader import StoreReader

            conn, dialect = self._connection, "postgresql" if sqlite_path(self.url) is None else "sqlite"
            if conn is None:  # (in-memory SQLite, another driver: a connection of the engine's own pool)
                self._raw = self.engine.raw_connection()
                conn, dialect = self._raw.driver_connection, self.engine.dialect.name
            self._reader = StoreReader(conn, dialect, self.url)
        return self._reader

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()
        elif self._connection is not None:
            self._connection.close()
        self._raw = self._connection = self._reader = None
        if self._engine is not None:
            self._engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(target: Settings | str | None = None, *, migrate: bool = True, readonly: bool = False) -> Store:
    """The store of ``target`` (Settings, or a URL/path; None: the default settings), at the schema
    head (migrated if needed). ``readonly``: for commands that only read — opened through the read connection
    alone (``connect.open_read``: no SQLAlchemy for a store at head), and a SQLite store that does not exist is
    not created (nor its directory): ``NoStoreError``. ``migrate=False`` with ``readonly``: a store at another
    schema is not opened (a ``StoreError``)."""
    from kbase.settings import Settings

    if isinstance(target, str):
        url, busy, connect = normalize_url(target), None, None
    else:
        settings = target or Settings.load()
        url, busy, connect = settings.store_url(), settings.busy_timeout_s, settings.connect_timeout_s
    path = sqlite_path(url)
    if path is not None:
        check_store_location(path)
    if readonly and (path is not None or url.startswith(PG_URL)):
        from kbase.store.read.connect import open_read

        busy_s = BUSY_TIMEOUT_S if busy is None else busy
        connect_s = CONNECT_TIMEOUT_S if connect is None else connect

        def upgrade(stamped: list[str] | None) -> None:
            upgrade_to_read(url, busy_s, stamped, connect_s)

        conn = open_read(url, busy_s, connect_s, upgrade if migrate else None)  # (None: ``connect.NotAtHead``)
        return Store(url, connection=conn, busy_timeout_s=busy, connect_timeout_s=connect)
    return Store(url, _open_engine(url, busy, connect, migrate), busy_timeout_s=busy, connect_timeout_s=connect)


def upgrade_to_read(url: str, busy_timeout_s: float | None, stamped: list[str] | None,
                    connect_timeout_s: float | None = None) -> None:
    """A store a read command found at another schema, upgraded through Alembic as by any command, or the usual
    refusal (newer, foreign). One that cannot be written says so, naming its revision."""
    try:
        _open_engine(url, busy_timeout_s, connect_timeout_s, migrate=True).dispose()
    except StoreError as exc:
        if "read-only" in exc.message and stamped:
            raise StoreError(f"store {mask_url(url)}: at schema revision {stamped[0]}, older than this kbase's "
                             f"{head_revision()}, and it cannot be upgraded here ({exc.message}); run kbase db "
                             "upgrade where it can be written, or read it with the kbase that wrote it") from None
        raise


def _checked_stamp(engine: Engine, url: str) -> list | None:
    from sqlalchemy import inspect

    stamped = _stamped_revisions(engine)
    check_stamp(url, stamped, lambda: set(inspect(engine).get_table_names()))
    return stamped


def _guarded(engine: Engine, url: str, work: Callable[[], T]) -> T:
    """``work()``; on any error the engine is disposed, a driver error becomes one line (``store_error``)."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        return work()
    except StoreError:
        engine.dispose()
        raise
    except (SQLAlchemyError, OSError) as exc:
        engine.dispose()
        raise store_error(url, exc) from None


def _open_engine(url: str, busy_timeout_s: float | None, connect_timeout_s: float | None, migrate: bool) -> Engine:
    engine = make_engine(url, busy_timeout_s, connect_timeout_s)
    return _guarded(engine, url, lambda: _migrated(engine, url, migrate))


def _migrated(engine: Engine, url: str, migrate: bool) -> Engine:
    """``engine`` once its store is checked (stamp, foreign tables, newer schema) and, with ``migrate``, at head."""
    if _checked_stamp(engine, url) == [head_revision()]:
        return engine
    if sqlite_path(url) is None and not is_memory(url):
        check_server_database(engine, url)
    current, head, known = schema_state(engine, url)
    if current is not None and current not in known:
        raise StoreError(
            f"store {mask_url(url)}: schema revision {current} comes from a newer kbase "
            f"(this one knows up to {head}); upgrade kbase — the database was not changed"
        )
    if migrate and current != head:
        with _schema_lock(engine, url):
            current, head, _ = schema_state(engine, url)
            if current != head:
                upgrade(engine, url)
    return engine


@contextlib.contextmanager
def write_transaction(engine: Engine, url: str = "") -> Iterator[Connection]:
    """One transaction that takes SQLite's write lock up front (BEGIN IMMEDIATE), so concurrent
    writers queue on the busy timeout instead of failing on a read→write lock upgrade."""
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
                try:
                    yield conn
                except BaseException:
                    conn.exec_driver_sql("ROLLBACK")
                    raise
                conn.exec_driver_sql("COMMIT")
            else:
                with conn.begin():
                    yield conn
    except SQLAlchemyError as exc:
        raise store_error(url or str(engine.url), exc) from None
