"""Finding a profile file in the store without reading it: ``kbase top FILE`` answers from the store
when this very file (its identity, ``readers.source``: the content of a small file, else device, inode,
size, mtime, ctime and first/last 64 KiB, with its ``-wal``/``-journal``/``-shm``) was snapshotted at the
current commit with the same window settings by this kbase version, and ``snapshot`` reads a file it does
not find before it opens the store for writing. An unsure identity (a file changed moments ago) is never
looked up: the file is read.

"Is this file stored?" has one answer, ``look_up``: the key (``identity_key``) asked of the store's reader
(``StoreReader.find_by_identity``, one query) on the store opened for reading, never created, migrated or
written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kbase.errors import InputError, KbaseError
from kbase.store.schema.guard import check_store_location

if TYPE_CHECKING:
    from collections.abc import Callable

    from kbase.analysis.board import LeaderboardRows
    from kbase.readers.source import SourceIdentity
    from kbase.settings import Settings
    from kbase.store.engine import Store
    from kbase.store.read.reader import StoreReader

    Identify = Callable[[], SourceIdentity | None]  # the profile's identity, taken once by the caller


IdentityKey = tuple[str, str, int, int, str, str]  # commit, probe, size, mtime (ns), window, kbase version


def identity_key(commit: str, ident: SourceIdentity, window_key: str) -> IdentityKey | None:
    """(commit, probe, size, mtime, window, kbase version): what a stored baseline of this very file holds;
    None for an unsure identity (never looked up: the file is read)."""
    from kbase.version import __version__

    if ident.probe is None:
        return None
    return (commit, ident.probe, ident.size, ident.mtime_ns, window_key, __version__)


class Lookup(NamedTuple):
    """What ``look_up`` found: ``decided`` when the store could answer (or there is no store: nothing is
    stored), ``found`` the newest matching baseline's id, ``reader`` the store's reader that answered (None
    without a store); ``unreachable``: why the store's server could not be reached (undecided)."""

    decided: bool
    found: int | None = None
    reader: StoreReader | None = None
    unreachable: KbaseError | None = None


@contextlib.contextmanager
def look_up(settings: Settings, key: IdentityKey | None, workload: str | None = None,
            store: Store | None = None) -> Iterator[Lookup]:
    """Is this file stored (``key``: ``identity_key``; of ``workload``, else any)? In ``store``, or the settings'
    store opened for reading only: a SQLite store that does not exist is nothing stored (decided); one that
    cannot answer without being changed (another schema revision, another application's file, no server)
    is undecided — the caller reads the file, or opens the store as usual and says what is wrong."""
    from kbase.store.engine import open_store
    from kbase.store_urls import is_memory, sqlite_path

    if store is not None:
        yield Lookup(True, find_stored(store.reader, key, workload), store.reader)
        return
    url = settings.store_url()
    db_file = sqlite_path(url)
    if db_file is not None:
        check_store_location(db_file)
    if db_file is not None and not db_file.is_file():
        yield Lookup(True)  # no store here: never create one for a read
        return
    if is_memory(url):
        yield Lookup(False)
        return
    from kbase.store.read.connect import ConnectError, NotAtHead

    try:
        opened = open_store(settings, migrate=False, readonly=True)
    except ConnectError as exc:
        yield Lookup(False, unreachable=exc)
        return
    except NotAtHead as exc:  # a database without tables is a store still to be created: nothing stored
        yield Lookup(exc.empty)
        return
    except KbaseError:
        yield Lookup(False)
        return
    with opened:
        try:
            found = find_stored(opened.reader, key, workload)
        except KbaseError:
            yield Lookup(False)
            return
        yield Lookup(True, found, opened.reader)


def find_stored(reader: StoreReader, key: IdentityKey | None, workload: str | None = None) -> int | None:
    """The newest baseline of this file (``key``) in ``reader``'s store, by one query; None for no key."""
    return None if key is None else reader.find_by_identity(*key, workload=workload)


def _note(baseline_id: int, head: str) -> str:
    return (f"from the store: baseline @{baseline_id} holds this file (same content identity: inode, size, times, "
            f"probe, side files) at the current commit {head[:12]} with the same window; the file itself was not read")


def stored_leaderboard_of(profile: Path, settings: Settings, identify: Identify | None = None
                          ) -> LeaderboardRows | None:
    """The stored leaderboard of ``profile`` at the current commit (with a note saying where it came from), or
    None when the store holds no such baseline, does not exist, or cannot be read as it is. Never creates,
    migrates or writes a store. ``identify``: the file's identity as the caller took it (None: taken here)."""
    from kbase.readers.source import source_identity
    from kbase.store_urls import sqlite_path

    db_file = sqlite_path(settings.store_url())
    if db_file is not None:
        check_store_location(db_file)  # a store that can never be: said whether or not the file is looked up
    head = head_commit(settings.repo)
    if head is None:
        return None
    try:
        ident = identify() if identify is not None else source_identity(profile)
    except (OSError, InputError):
        ident = None
    key = None if ident is None else identity_key(head, ident, settings.window.key())
    if key is None:
        return None  # unsure, or a file that cannot be looked at: read (the reader says why)
    with look_up(settings, key) as got:
        if got.found is None or got.reader is None:
            return None
        try:
            b = got.reader.get_baseline(got.found)
            board = None if b is None else got.reader.leaderboard(b)
        except KbaseError:
            return None  # a row that does not read: the file is read as usual
    if board is not None:
        board.notes.append(_note(got.found, head))
    return board


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
