"""Finding a profile file in the store without reading it: ``kbase top FILE`` answers from the store
when this very file (its identity, ``readers.source``: the content of a small file, else device, inode,
size, mtime, ctime and first/last 64 KiB, with its ``-wal``/``-journal``/``-shm``) was snapshotted at the
current commit with the same window settings by this kbase version. An unsure identity (a file changed
moments ago) is never looked up: the file is read."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from kbase.errors import InputError
from kbase.store.guard import check_store_location

if TYPE_CHECKING:
    from collections.abc import Callable

    from kbase.analysis.board import LeaderboardRows
    from kbase.analysis.leaderboard import Leaderboard
    from kbase.readers.source import SourceIdentity
    from kbase.settings import Settings

    Identify = Callable[[], SourceIdentity | None]  # the profile's identity, taken once by the caller


def _identity_key(profile: Path, settings: Settings, identify: Identify | None = None) -> tuple | None:
    """(HEAD, probe, size, mtime, window, kbase version) of ``profile``, or None (no repository, an
    unreadable file: the reader reports it in its own words). ``identify``: the identity the caller took."""
    from kbase.readers.source import source_identity
    from kbase.version import __version__

    head = head_commit(settings.repo)
    if head is None:
        return None
    if identify is not None:
        ident = identify()
    else:
        try:
            ident = source_identity(profile)
        except (OSError, InputError):
            return None
    if ident is None or ident.probe is None:
        return None  # unsure: read the file
    return (head, ident.probe, ident.size, ident.mtime_ns, settings.window.key(), __version__)


def _note(baseline_id: int, head: str) -> str:
    return (f"from the store: baseline @{baseline_id} holds this file (same content identity: inode, size, times, "
            f"probe, side files) at the current commit {head[:12]} with the same window; the file itself was not read")


def stored_rows_of(profile: Path, settings: Settings, identify: Identify | None = None
                   ) -> tuple[bool, LeaderboardRows | None]:
    """``stored_leaderboard_of`` as rows, read from a store at the head schema on the read-only path
    (``store.fast_read``: no SQLAlchemy, no pandas): ``kbase top FILE`` of a stored file answers in the
    time of the identity check and one query. (decided, rows): ``decided`` when this path could answer
    (no store file, no repository, or a head-schema store: found or not); otherwise the caller asks
    ``stored_leaderboard_of`` (another schema, another driver, ``KBASE_NO_FAST_READ``)."""
    from kbase.store_urls import sqlite_path

    url = settings.store_url()
    db_file = sqlite_path(url)
    if db_file is None and not url.startswith("postgresql+psycopg:"):
        return False, None
    if db_file is not None:
        check_store_location(db_file)
    if db_file is not None and not db_file.is_file():
        return True, None  # no store here: never create one for a read
    key = _identity_key(profile, settings, identify)
    if key is None:
        return True, None

    from kbase.store.fast_read import read_only

    def rows(rd) -> list:  # a list: None from read_only means "this path does not apply"
        found = rd.find_by_identity(*key)
        b = None if found is None else rd.get_baseline(found)
        return [] if b is None else [found, rd.leaderboard_rows(b)]

    got = read_only(url, settings.busy_timeout_s, rows)
    if got is None:
        return False, None
    if not got:
        return True, None
    found, board = got
    board.notes.append(_note(found, key[0]))
    return True, board


def stored_leaderboard_of(profile: Path, settings: Settings, identify: Identify | None = None) -> Leaderboard | None:
    """The stored leaderboard of ``profile`` (with a note saying where it came from), or None when the
    store holds no such baseline, does not exist, or cannot be read at this schema. Never creates,
    migrates or writes a store."""
    from kbase.store.engine import sqlite_path

    url = settings.store_url()
    db_file = sqlite_path(url)
    if db_file is not None:
        check_store_location(db_file)
    if db_file is not None and not db_file.is_file():
        return None  # no store here: never create one for a read
    key = _identity_key(profile, settings, identify)
    if key is None:
        return None
    head, probe, size, mtime_ns, wkey, version = key
    if db_file is not None and sqlite_identity_lookup(db_file, key)[1] is None:
        return None  # the common miss costs one SQLite query, not the store stack's imports (~0.3 s)
    from sqlalchemy.exc import SQLAlchemyError

    from kbase.errors import KbaseError
    from kbase.store.engine import open_store
    from kbase.store.queries import load_leaderboard
    from kbase.store.reader import EngineReader

    try:
        with open_store(settings, migrate=False, readonly=True) as st:
            found = EngineReader(st.engine).find_by_identity(head, probe, size, mtime_ns, wkey, version)
            if found is None:
                return None
            lb = load_leaderboard(st.engine, found)
    except (KbaseError, SQLAlchemyError):
        return None  # an older or unreadable store: the file is read as usual
    lb.notes.append(_note(found, head))
    return lb


def sqlite_identity_lookup(db_file: Path, key: tuple) -> tuple[bool, int | None]:
    """(decided, id): the id ``reader.find_by_identity`` finds (any workload) for ``key`` = (commit,
    probe, size, mtime_ns, window, kbase version), by one read-only query through Python's sqlite3;
    ``decided`` False when the read-only path does not apply (another application's database, a store at
    another schema revision, one that cannot be read). Whatever ``KBASE_NO_FAST_READ`` says: it spares the
    store stack's imports on a miss."""
    import sqlite3

    from kbase.store.sqlite_read import open_reader

    reader = open_reader("sqlite:///" + str(db_file))
    if reader is None:
        return False, None
    try:
        return True, reader.find_by_identity(*key)
    except sqlite3.Error:
        return False, None
    finally:
        reader.close()


def head_commit(repo: Path | None) -> str | None:
    """HEAD's full hash by ``git rev-parse`` (a few ms; GitPython's import alone costs more), or None."""
    import subprocess

    try:
        out = subprocess.run(["git", "-C", str(repo or Path.cwd()), "rev-parse", "--verify", "-q", "HEAD"],
                             capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    head = out.stdout.strip().lower()
    return head if out.returncode == 0 and len(head) == 40 else None
