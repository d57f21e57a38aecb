"""Front door, capture side: storing a snapshot's leaderboard (``capture.snapshot``) — on the driver where the
store allows (``store.create``, ``store.writer``: no SQLAlchemy, SQLModel or Alembic), else through SQLAlchemy —
and what it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbase.api.common import _store
from kbase.settings import Settings

if TYPE_CHECKING:
    from kbase.analysis.leaderboard import Leaderboard
    from kbase.gitrepo import CommitInfo
    from kbase.readers.source import SourceIdentity, SourceInfo
    from kbase.store.engine import Store
    from kbase.store.models import Baseline
    from kbase.store.records import BaselineRecord

    AnyBaseline = Baseline | BaselineRecord  # a model, or the read-only path's record of it


@dataclass
class SnapshotResult:
    baseline: AnyBaseline  # a ``Baseline``; its record when the snapshot was written on the driver
    leaderboard: Leaderboard
    created: bool  # False: an identical baseline (same file, window and commit) already existed

    def __repr__(self) -> str:
        from kbase.render.notebook import stored_line

        return stored_line("SnapshotResult", self.baseline, self.leaderboard, self.created)

    def _repr_html_(self) -> str:
        from kbase.render.notebook import stored_html

        return stored_html("SnapshotResult", self.baseline, self.leaderboard, self.created)


def _save(st: Store, lb: Leaderboard, source: SourceInfo, settings: Settings, commit: CommitInfo, wkey: str,
          tags: list[str] | None, note: str, force: bool, kind: str = "snapshot") -> SnapshotResult:
    """Store ``lb`` unless the same bytes are stored at this commit and window already (another mtime)."""
    from kbase.store.queries import load_leaderboard, save_leaderboard
    from kbase.store.reader import EngineReader

    dup = None if force else EngineReader(st.engine).find_duplicate(settings.workload, commit.hash, source.sha256,
                                                                     wkey)
    if dup is not None and dup.id is not None:
        return SnapshotResult(baseline=dup, leaderboard=load_leaderboard(st.engine, dup.id), created=False)
    saved = save_leaderboard(st.engine, lb, workload=settings.workload, commit=commit, source=source,
                             window_spec=wkey, tags=tags, note=note, url=st.url, force=force, kind=kind)
    if not saved.created and saved.baseline.id is not None:  # a concurrent snapshot stored it first
        lb = load_leaderboard(st.engine, saved.baseline.id)
    return SnapshotResult(baseline=saved.baseline, leaderboard=lb, created=saved.created)


def _save_direct(settings: Settings, lb: Leaderboard, source: SourceInfo, commit: CommitInfo, wkey: str,
                 tags: list[str] | None, note: str, force: bool, kind: str) -> SnapshotResult:
    """``_save`` on the driver (``store.create``, ``store.writer``: no SQLAlchemy, SQLModel or Alembic), the store
    created if new; a store that path does not open (another schema revision: Alembic upgrades it) through
    ``_save``. A capture stored already answers with its stored leaderboard."""
    from kbase.store.codec import baseline_values
    from kbase.store.create import open_direct
    from kbase.store.writer import written_record

    direct = open_direct(settings)
    if direct is None:
        with _store(settings, None) as st:
            return _save(st, lb, source, settings, commit, wkey, tags, note, force, kind)
    values = baseline_values(lb, workload=settings.workload, commit=commit, source=source, window_spec=wkey,
                             tags=tags, note=note, kind=kind)
    with direct:
        written = direct.save(lb, values, force=force)
    baseline = written_record(values, written)
    if written.created:
        return SnapshotResult(baseline=baseline, leaderboard=lb, created=True)
    from kbase.store.queries import load_leaderboard

    with _store(settings, None) as st:
        return SnapshotResult(baseline=baseline, leaderboard=load_leaderboard(st.engine, written.id), created=False)


def read_before_store(settings: Settings, commit: str, ident: SourceIdentity, window_spec: str, *,
                      force: bool = False) -> bool:
    """Whether ``snapshot`` may read the profile before it opens the store: a store not created yet (no SQLite
    file; a PostgreSQL database without tables), or one at the head schema (read by one query on the driver, no
    SQLAlchemy) that holds no baseline of this very file (``readers.source`` identity; an unsure one finds none)
    at ``commit`` with this window (``force``: whatever it holds).
    False (another schema, a foreign database, a server that cannot be reached, a likely match): the store is
    asked first, as usual."""
    from kbase.store.guard import check_store_location
    from kbase.store.identity import sqlite_identity_lookup
    from kbase.store_urls import sqlite_path
    from kbase.version import __version__

    url = settings.store_url()
    key = (commit, ident.probe, ident.size, ident.mtime_ns, window_spec, __version__)
    db_file = sqlite_path(url)
    if db_file is None:
        from kbase.store.create import pg_identity_lookup

        decided, found = pg_identity_lookup(url, key, settings.busy_timeout_s)
        return decided and (force or found is None)
    check_store_location(db_file)  # a store that can never be created: said before the profile is read
    if not db_file.exists():
        return True
    decided, found = sqlite_identity_lookup(db_file, key)
    return decided and (force or found is None)
