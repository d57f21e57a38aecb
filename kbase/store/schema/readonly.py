"""Opening a SQLite store for reading only, wherever it lies: also on read-only media (a mounted CI cache, a
read-only bind mount, a folder the user may not write), where SQLite's ``mode=ro`` cannot open a WAL-mode
database because it cannot create the ``-shm`` beside it.

``connect_store`` tries, in order:

1. ``mode=ro``: the usual read-only connection (it shares the WAL index with writers: always current);
2. when that cannot open the file and no side file holds committed content (no non-empty ``-wal`` or
   ``-journal``): ``mode=ro&immutable=1``. Safe then: immutable only means SQLite does not look for changes
   while the connection is open, and a store nothing can write beside has no writer (a writer would need
   that very ``-wal``/``-shm``);
3. otherwise (committed frames in a ``-wal`` that cannot be opened read-only in place): a private temporary
   copy with the side files applied as SQLite applies them (``readers.sqlite_source.committed_copy``), opened
   immutable and removed when the connection closes.

Nothing is ever created or written beside the store on any path.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

from kbase.readers.sqlite_source import committed_copy, side_files


class _CopyConnection(sqlite3.Connection):
    """A connection to a private copy of a store: the copy's folder goes when the connection closes."""

    folder: str | None = None

    def close(self) -> None:
        super().close()
        if self.folder is not None:
            import shutil

            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


_CANTOPEN, _READONLY = 14, 8  # SQLite's primary result codes


def _cannot_open_beside(exc: sqlite3.Error) -> bool:
    """Whether ``mode=ro`` failed because SQLite could not open or create a file beside the store (its
    ``-shm`` on read-only media), not because of a lock or damage."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_CANTOPEN, _READONLY)
    return "unable to open" in str(exc) or "readonly" in str(exc)


def _uri(path: Path, options: str) -> str:
    return f"file:{quote(str(path.resolve()))}?{options}"


def _checked(conn: sqlite3.Connection) -> sqlite3.Connection:
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the first read: opening happens here
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def connect_store(path: Path, timeout: float = 30.0, *, immutable_first: bool = False) -> sqlite3.Connection:
    """A read-only connection to the SQLite database at ``path`` (see the module for the order tried).
    ``immutable_first``: begin with ``immutable=1`` when no side file holds committed content (a look at
    somebody else's file that must not leave a ``-shm`` beside it). Raises ``sqlite3.Error`` (the first
    attempt's) when no way opens it."""
    sides = side_files(path)
    if immutable_first and not sides:
        return _checked(sqlite3.connect(_uri(path, "mode=ro&immutable=1"), uri=True, timeout=timeout,
                                        check_same_thread=False))
    try:
        return _checked(sqlite3.connect(_uri(path, "mode=ro"), uri=True, timeout=timeout, check_same_thread=False))
    except sqlite3.OperationalError as first:
        if not _cannot_open_beside(first):
            raise  # (locked, busy, damaged: what SQLite says; never read around a writer)
        error = first
    try:
        if not sides:
            return _checked(sqlite3.connect(_uri(path, "mode=ro&immutable=1"), uri=True, timeout=timeout,
                                            check_same_thread=False))
        import shutil  # (only here: a copy is rare, and these imports are ~5 ms of every stored read)
        import tempfile

        folder = tempfile.mkdtemp(prefix="kbase-store-")
        try:
            copy = committed_copy(path, sides, Path(folder))
            conn = sqlite3.connect(_uri(copy, "mode=ro&immutable=1"), uri=True, timeout=timeout,
                                   check_same_thread=False, factory=_CopyConnection)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        assert isinstance(conn, _CopyConnection)
        conn.folder = folder
        return _checked(conn)
    except Exception:  # noqa: BLE001 - (also the copy's InputError) the first error says what is wrong
        raise error from None
