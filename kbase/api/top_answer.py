"""``kbase.top``: a profile's leaderboard, answered from the store (this very file snapshotted at the current
commit), from the top cache (``store.top_cache``: a leaderboard ``kbase top`` computed before), or by reading
the file. The file's identity (``readers.source``) is taken once and serves both look-ups."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal, overload

from kbase.api import capture
from kbase.settings import Settings

if TYPE_CHECKING:
    from kbase.analysis.board import AnyLeaderboard, LeaderboardRows
    from kbase.analysis.leaderboard import Leaderboard
    from kbase.api.common import Progress
    from kbase.readers.source import SourceIdentity


class _Identity:
    """The profile's identity, taken on first use (None: it cannot be looked at: the reader says why)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._got: list[SourceIdentity | None] = []
        handed = _HANDED.pop(str(path), None)
        if handed is not None:
            from kbase.readers.source import unchanged_now

            if unchanged_now(path, handed):
                self._got.append(handed)

    def taken(self) -> SourceIdentity | None:
        """The identity if it was taken already (None otherwise, or when it could not be)."""
        return self._got[0] if self._got else None

    def get(self) -> SourceIdentity | None:
        if not self._got:
            from kbase.errors import InputError
            from kbase.readers.source import source_identity

            try:
                self._got.append(source_identity(self.path))
            except (OSError, InputError):
                self._got.append(None)
        return self._got[0]


# An identity taken by ``answer_at_once`` that found nothing, for the ``top`` call that reads the file next in
# this process (``cli.fast_top``, then the command line): taken once, and used only while the file's stat is
# as it was (``readers.source.unchanged_now``).
_HANDED: dict[str, SourceIdentity] = {}


def answer_at_once(profile: Path, settings: Settings, *, per_gpu: bool = False, from_store: bool = True,
                   cache: bool = True) -> AnyLeaderboard | None:
    """The leaderboard ``top(profile, settings, per_gpu=..., stored_rows=True, from_store=..., cache=...)``
    answers without reading the file (from the store, or the top cache), or None."""
    ident = _Identity(profile)
    if from_store and not per_gpu:
        stored = _from_store(profile, settings, ident)
        if stored is not None:
            return stored
    if cache:
        from kbase.store.read.top_cache import for_profile

        entry = for_profile(profile, settings, ident.get(), per_gpu)
        cached = entry.load() if entry is not None else None
        if cached is not None:
            return cached
    got = ident.taken()
    if got is not None:
        _HANDED[str(profile)] = got
    return None


@overload
def top(profile: Path | str | None = None, settings: Settings | None = None, *, per_gpu: bool = False,
        progress: Progress | None = None, sketches: bool = False, from_store: Literal[False] = False,
        stored_rows: Literal[False] = False, ops: bool | None = None, cache: bool = False,
        samples: bool = True) -> Leaderboard: ...


@overload
def top(profile: Path | str | None = None, settings: Settings | None = None, *, per_gpu: bool = False,
        progress: Progress | None = None, sketches: bool = False, from_store: bool = False,
        stored_rows: bool = False, ops: bool | None = None, cache: bool = False,
        samples: bool = True) -> AnyLeaderboard: ...


def top(profile: Path | str | None = None, settings: Settings | None = None, *, per_gpu: bool = False,
        progress: Progress | None = None, sketches: bool = False, from_store: bool = False,
        stored_rows: bool = False, ops: bool | None = None, cache: bool = False,
        samples: bool = True) -> AnyLeaderboard:
    """read -> window -> leaderboard of a profile (default: the settings' ``profile``); ``ops``: with each
    kernel's split by the op that launched it (``Leaderboard.ops``; default: with ``sketches``), read from
    the file (a stored or cached leaderboard is not used then).

    ``from_store``: when this very file was snapshotted at the current commit with the same window by this
    kbase version, its stored leaderboard instead (a cheap identity check finds it: size, mtime and a hash
    of the first and last 64 KiB, no full read; nothing is created or migrated), as every read of a stored
    leaderboard returns it: the renderers' rows (``analysis.board.LeaderboardRows``), read without SQLAlchemy
    or pandas (``kbase top FILE`` of a stored file answers at once). A computed one stays a ``Leaderboard``.

    ``cache``: keep a computed leaderboard in the top cache (``store.top_cache``, beside the store; capped
    by ``Settings.cache_max_mb``, 0: off), and with ``stored_rows`` answer from it when this very file was
    computed before with the same window and view: the same rows, summary and notes as reading it, as
    ``LeaderboardRows``, without importing numpy.

    ``samples``: False leaves a computed leaderboard's per-iteration samples empty (``Leaderboard.samples``:
    what the diff and the store use; ``kbase top`` shows none and the top cache keeps none)."""
    settings = settings or Settings.load()
    path = capture._profile_path(profile, settings)
    ident = _Identity(path)
    if from_store and not per_gpu and not sketches and not ops:
        stored = _from_store(path, settings, ident)
        if stored is not None:
            return stored
    entry = None
    if cache and not sketches and not ops:
        from kbase.store.read.top_cache import for_profile

        entry = for_profile(path, settings, ident.get(), per_gpu)
        cached = entry.load() if entry is not None and stored_rows else None
        if cached is not None:
            return cached
    lb = capture._board(path, settings, progress, per_gpu=per_gpu, sketches=sketches, ops=ops, samples=samples)
    if entry is not None:
        from kbase.readers.source import unchanged_now

        before = ident.get()
        if before is not None and unchanged_now(path, before):  # what was read is what the identity names
            entry.save(lb)
    return lb


def _from_store(path: Path, settings: Settings, ident: _Identity) -> LeaderboardRows | None:
    from kbase.store.identity import stored_leaderboard_of

    return stored_leaderboard_of(path, settings, ident.get)
