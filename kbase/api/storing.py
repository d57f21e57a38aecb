"""Front door, capture side: storing a snapshot's leaderboard (``capture.snapshot``) — on the driver where the
store allows (``store.create``, ``store.writer``: no SQLAlchemy, SQLModel or Alembic), else through SQLAlchemy —
and what it answers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kbase.api.common import _store
from kbase.display import Shown
from kbase.settings import Settings

if TYPE_CHECKING:
    from kbase.analysis.board import LeaderboardRows
    from kbase.analysis.leaderboard import Leaderboard
    from kbase.gitrepo import CommitInfo
    from kbase.readers.source import SourceInfo
    from kbase.store.engine import Store
    from kbase.store.schema.records import BaselineRecord


@dataclass(repr=False)
class SnapshotResult(Shown):  # shows itself with render.notebook's formatters
    baseline: BaselineRecord  # the stored row, as every read returns it
    leaderboard: LeaderboardRows  # what was stored (the computed leaderboard's rows, or the stored one's)
    created: bool  # False: an identical baseline (same file, window and commit) already existed


def _save(st: Store, lb: Leaderboard, source: SourceInfo, settings: Settings, commit: CommitInfo, wkey: str,
          tags: list[str] | None, note: str, force: bool, kind: str = "snapshot") -> SnapshotResult:
    """Store ``lb`` unless the same bytes are stored at this commit and window already (another mtime)."""
    from kbase.analysis.board import board_of
    from kbase.store.write.queries import save_leaderboard

    dup = None if force else st.reader.find_duplicate(settings.workload, commit.hash, source.sha256, wkey)
    if dup is not None:
        return SnapshotResult(baseline=dup, leaderboard=st.reader.leaderboard(dup), created=False)
    saved = save_leaderboard(st.engine, lb, workload=settings.workload, commit=commit, source=source,
                             window_spec=wkey, tags=tags, note=note, url=st.url, force=force, kind=kind)
    if not saved.created:  # a concurrent snapshot stored it first
        return SnapshotResult(baseline=saved.baseline, leaderboard=st.reader.leaderboard(saved.baseline),
                              created=False)
    return SnapshotResult(baseline=saved.baseline, leaderboard=board_of(lb), created=True)


def _save_direct(settings: Settings, lb: Leaderboard, source: SourceInfo, commit: CommitInfo, wkey: str,
                 tags: list[str] | None, note: str, force: bool, kind: str) -> SnapshotResult:
    """``_save`` on the driver (``store.create``, ``store.writer``: no SQLAlchemy, SQLModel or Alembic), the store
    created if new; a store that path does not open (another schema revision: Alembic upgrades it) through
    ``_save``. A capture stored already answers with its stored leaderboard, read on the same connection."""
    from kbase.analysis.board import board_of
    from kbase.store.codec.codec import baseline_values
    from kbase.store.write.create import open_direct
    from kbase.store.write.writer import written_record

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
            return SnapshotResult(baseline=baseline, leaderboard=board_of(lb), created=True)
        return SnapshotResult(baseline=baseline, leaderboard=direct.reader.leaderboard(baseline), created=False)
