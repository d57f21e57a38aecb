"""Open a SQLite export for reading without writing anything beside it, committed rows included.

An export is opened with SQLite's ``mode=ro&immutable=1``: no journal, lock or ``-shm`` file is ever
created next to the user's file, and read-only media work. Immutable mode ignores a ``-wal`` file,
though, and a database in WAL mode may still hold committed rows there (a tool that wrote the
export and did not checkpoint it); likewise a hot ``-journal`` means the main file holds part of a
transaction that never committed. In either case the export is read through a private temporary
copy of the database and its side file, which SQLite brings to the committed state (WAL replayed
and checkpointed, journal rolled back) before it is read. The user's files are only ever read.
"""

from __future__ import annotations

import contextlib
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

from kbase.errors import InputError

_WAL_MODE_OFFSET = 18  # header bytes 18 and 19 are 2 in a WAL-mode database


def readonly_uri(path: Path) -> str:
    return f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open an export so that nothing can be written to it, not even a lock or journal file."""
    return sqlite3.connect(readonly_uri(path), uri=True, check_same_thread=False)


def _side_files(path: Path) -> list[tuple[str, Path]]:
    """The ``-wal`` / ``-journal`` beside the export that change what its committed content is."""
    found: list[tuple[str, Path]] = []
    # SQLite names side files after the real file, symlinks resolved; look beside both.
    bases = list(dict.fromkeys([str(path), str(path.resolve())]))
    for suffix in ("-wal", "-journal"):
        for base in bases:
            side = Path(base + suffix)
            try:
                if side.is_file() and side.stat().st_size > 0:
                    found.append((suffix, side))
                    break
            except OSError:
                continue
    if not found:
        return []
    try:
        with open(path, "rb") as fh:
            header = fh.read(20)
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    wal_mode = len(header) == 20 and header[_WAL_MODE_OFFSET] == 2 and header[_WAL_MODE_OFFSET + 1] == 2
    # SQLite itself ignores a -wal beside a rollback-mode database, and a -journal beside a WAL one.
    return [(s, p) for s, p in found if (s == "-wal") == wal_mode]


@contextlib.contextmanager
def committed_export(path: Path) -> Iterator[Path]:
    """The file to read for ``path``: itself, or a private copy with its committed state applied.

    The temporary copy is removed on every exit path (error and KeyboardInterrupt included).
    """
    sides = _side_files(path)
    if not sides:
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="kbase-export-", ignore_cleanup_errors=True) as tmp:
        copy = Path(tmp) / "export.sqlite"
        source = path
        try:
            shutil.copyfile(path, copy)
            for suffix, side in sides:
                source = side
                shutil.copyfile(side, Path(str(copy) + suffix))
        except OSError as exc:
            raise InputError(f"{source}: cannot copy it to a temporary folder to read it "
                             f"({exc.strerror or exc})") from None
        conn = sqlite3.connect(copy)  # read-write, on our copy only: replays the WAL or rolls back
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # first read: recovery runs here
            conn.execute("PRAGMA journal_mode=DELETE").fetchall()  # checkpoint into the copy's main file
        except sqlite3.DatabaseError as exc:
            names = " and ".join(str(s) for _, s in sides)
            raise InputError(f"{path}: cannot apply {names} ({exc})") from None
        finally:
            conn.close()
        yield copy
