"""Open a SQLite export for reading without writing anything beside it, committed rows included.

An export is opened with SQLite's ``mode=ro&immutable=1``: no journal, lock or ``-shm`` file is ever
created next to the user's file, and read-only media work. Immutable mode ignores side files, though,
and SQLite itself (opening the file normally) applies them: a ``-wal`` holding committed frames (a tool
that wrote the export and did not checkpoint it) is read whatever the header's journal mode says — a
``-wal`` beside a rollback-mode database too (SQLite opens the WAL whenever the file exists) — and a hot
``-journal`` is rolled back (the main file holds part of a transaction that never committed). When a
non-empty side file is there, the export is read through a private temporary copy of the database and
its side files, which SQLite brings to the committed state exactly as it would the user's files (WAL
replayed and checkpointed, journal rolled back; frames or journals SQLite finds invalid are ignored by
it, as they would be). The user's files are only ever read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from kbase.errors import InputError

if TYPE_CHECKING:  # sqlite3 loads where a file is opened: ``side_files`` serves the identity (``kbase top`` cached)
    import sqlite3

# The side files that change what a SQLite database's committed content is (``-shm`` is an index of the
# -wal, rebuilt from it: it changes nothing).
SIDE_SUFFIXES = ("-wal", "-journal")


def readonly_uri(path: Path) -> str:
    return f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"


def connect_readonly(path: Path) -> sqlite3.Connection:
    """Open an export so that nothing can be written to it, not even a lock or journal file."""
    import sqlite3

    return sqlite3.connect(readonly_uri(path), uri=True, check_same_thread=False)


def side_files(path: Path, *suffixes: str, empty_too: bool = False) -> list[tuple[str, Path]]:
    """The ``-wal`` / ``-journal`` (or ``suffixes``) beside the export that SQLite would apply: non-empty
    ones (``empty_too``: present ones), each named after the real file (SQLite resolves symlinks first),
    else after the path as given (older SQLite builds)."""
    found: list[tuple[str, Path]] = []
    try:
        bases = list(dict.fromkeys([str(path.resolve()), str(path)]))
    except (OSError, RuntimeError):  # a symlink loop: the reader says what is wrong with the file
        bases = [str(path)]
    for suffix in suffixes or SIDE_SUFFIXES:
        for base in bases:
            side = Path(base + suffix)
            try:
                if side.is_file() and (empty_too or side.stat().st_size > 0):
                    found.append((suffix, side))
                    break
            except OSError:
                continue
    return found


def committed_copy(path: Path, sides: list[tuple[str, Path]], folder: Path) -> Path:
    """A copy of database ``path`` in ``folder`` with its side files ``sides`` applied as SQLite applies them
    (WAL replayed and checkpointed, journal rolled back): a plain rollback-mode file. Only ever reads ``path``."""
    import shutil
    import sqlite3

    copy = folder / "database.sqlite"
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
    return copy


@contextlib.contextmanager
def committed_export(path: Path) -> Iterator[Path]:
    """The file to read for ``path``: itself, or a private copy with its committed state applied.

    The temporary copy is removed on every exit path (error and KeyboardInterrupt included).
    """
    sides = side_files(path)
    if not sides:
        yield path
        return
    import tempfile  # (only here: with shutil, bz2 and lzma, ~4 ms of every read)

    with tempfile.TemporaryDirectory(prefix="kbase-export-", ignore_cleanup_errors=True) as tmp:
        yield committed_copy(path, sides, Path(tmp))
