"""What the store refuses to touch: an existing file or database that is not a kbase store (checked
without writing, locking or creating anything), and the migration lock file that must not outlive a command."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kbase.errors import StoreError
from kbase.store.schema.schema_names import EARLIER_TABLES, OWN_TABLES, SQLITE_INTERNAL_TABLES, head_revision
from kbase.store_urls import mask_url

SQLITE_MAGIC = b"SQLite format 3\x00"


def check_store_location(path: Path) -> None:
    """Refuse a store path that can never hold a database file: a folder, or a path under a file
    (``--db notes.txt/kbase.db``). A missing folder is fine (a writing command creates it, a reading one
    finds no store). Checked by every command that opens or looks for a SQLite store, read-only ones too."""
    try:
        if stat.S_ISDIR(os.stat(path).st_mode):
            raise StoreError(f"store {path}: is a directory, not a database file", path=path)
        return  # it exists and is not a folder: the file checks say whether it is a store
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        raise StoreError(f"store {path}: cannot be looked at ({exc.strerror or exc})", path=path) from None
    for parent in path.parents:
        try:
            mode = os.stat(parent).st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue  # missing (created later), or under a file: a parent further up says which
        except OSError as exc:
            raise StoreError(f"store {path}: its folder {parent} cannot be looked at ({exc.strerror or exc})",
                             path=path) from None
        if not stat.S_ISDIR(mode):
            raise StoreError(f"store {path}: {parent} is a file, not a directory", path=path)
        return


def _sqlite_tables(path: Path) -> set[str]:
    """The table names of an existing SQLite file, read without writing, locking or creating anything
    (immutable; a -wal with content beside it through a read-only connection, or a private copy where even
    that cannot open it: ``readonly.connect_store``)."""
    from kbase.store.schema.readonly import connect_store

    conn = connect_store(path, immutable_first=True)
    try:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    finally:
        conn.close()
    return {str(r[0]) for r in rows}


def check_sqlite_file(path: Path) -> set[str]:
    """Refuse, untouched, an existing file that is not a kbase store: not SQLite at all (a profile trace,
    a text file), or a SQLite database with tables of its own (another application's, an nsys export).
    An empty file or one without tables may become a store. Returns the file's tables (none: no file)."""
    import sqlite3

    try:
        if not path.exists() or path.stat().st_size == 0:
            return set()
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise StoreError(f"store {path}: cannot be read ({exc.strerror})", path=path) from None
    if head != SQLITE_MAGIC:
        raise StoreError(f"store {path}: exists and is not a SQLite database; refusing to use it as the store "
                         "(the file was not changed)", path=path)
    try:
        tables = _sqlite_tables(path)
    except sqlite3.Error as exc:
        raise StoreError(f"store {path}: cannot be read as a database ({exc}); the file was not changed",
                         path=path) from None
    _refuse_foreign(str(path), tables)
    return tables


def _own_tables() -> set[str]:
    """kbase's tables of any revision and Alembic's version table (``schema_names``; a test keeps the head's
    set equal to the models' ``SQLModel.metadata``)."""
    return set(OWN_TABLES | EARLIER_TABLES)


def _refuse_foreign(where: str, tables: set[str]) -> None:
    # Only kbase's own tables (some of them: another process may be creating this store right now) is a
    # kbase store; any other table is somebody else's database.
    if tables - _own_tables() - SQLITE_INTERNAL_TABLES:
        shown = ", ".join(sorted(tables)[:4]) + (", …" if len(tables) > 4 else "")
        raise StoreError(f"store {where}: holds tables that are not a kbase store ({shown}); refusing to use it as "
                         "the store, nothing was changed")


def check_server_database(engine: Any, url: str) -> None:
    """The same refusal for a server database: tables in its schema and no kbase store among them."""
    from sqlalchemy import inspect

    _refuse_foreign(mask_url(url), set(inspect(engine).get_table_names()))


def check_stamp(url: str, stamped: list[str] | None, tables: Callable[[], set[str]]) -> None:
    """A store whose version table cannot be right: more than one revision in it (Alembic refuses to read
    it), or the head revision with one of kbase's tables missing (``tables()``: the store's; a damaged or
    hand-edited store). One line, nothing changed: migrating or writing it could only make things worse."""
    if stamped is None:
        return
    if len(stamped) > 1:
        shown = ", ".join(repr(v) for v in stamped[:4]) + (", …" if len(stamped) > 4 else "")
        raise StoreError(f"store {mask_url(url)}: its alembic_version table holds {len(stamped)} revisions "
                         f"({shown}) where a kbase store has one: damaged or edited by hand; nothing was changed")
    # (No row beside kbase's tables is not refused here: a store being created by another process looks so
    # for a moment, since SQLite's driver runs the migrations' DDL outside a transaction.)
    if stamped == [head_revision()]:  # (the stamp reaches head only after the last migration's tables exist)
        missing = sorted(OWN_TABLES - tables())
        if missing:
            raise StoreError(f"store {mask_url(url)}: stamped at revision {head_revision()} but table(s) "
                             f"{', '.join(missing)} are missing: damaged or edited by hand; nothing was changed")


@contextlib.contextmanager
def _file_lock(lock_path: Path) -> Iterator[None]:
    """An exclusive flock on ``lock_path``, removed again when released (also on error or Ctrl-C). A waiter
    that wakes up holding a lock on a file already removed retries on the path's new file, so removing it
    never lets two processes in at once. (SIGKILL may leave the empty file; it holds no lock.)"""
    import fcntl

    while True:
        try:
            fh = open(lock_path, "a+")
        except OSError:
            yield None  # read-only directory: nothing can migrate anyway
            return
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            same = os.path.exists(lock_path) and os.stat(lock_path).st_ino == os.fstat(fh.fileno()).st_ino
        except OSError:
            same = False
        if same:
            break
        fh.close()
    try:
        yield None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(lock_path)
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()
