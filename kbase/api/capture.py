"""Front door, capture side: read -> window -> leaderboard of a profile, and storing it (snapshot,
baselines, baseline, remove)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.display import Shown
from kbase.errors import InputError
from kbase.settings import Settings

if TYPE_CHECKING:
    import pandas as pd

    from kbase.analysis.board import LeaderboardRows
    from kbase.analysis.classify import KernelKind
    from kbase.analysis.leaderboard import Leaderboard
    from kbase.analysis.ops import OpColumns
    from kbase.analysis.window import Window
    from kbase.gitrepo import CommitNote
    from kbase.readers.profile import Profile
    from kbase.readers.source import SourceIdentity, SourceInfo
    from kbase.store.engine import Store
    from kbase.store.schema.records import BaselineRecord

from kbase.api.common import Progress, _store, check_baseline_workload, unknown_workload, warm_imports
from kbase.api.storing import SnapshotResult, _save, _save_direct

# ------------------------------------------------------------------------------------------ stages


def read(path: Path | str, settings: Settings | None = None, *, progress: Progress | None = None,
         fmt: str | None = None) -> Profile:
    """Stage 1: a profile file (or per-rank trace directory) as DataFrames (``readers.profile``);
    ``fmt`` skips format detection when the caller already did it."""
    from kbase.readers import read_profile

    settings = settings or Settings.load()
    profile = read_profile(Path(path), progress=progress, fmt=fmt, nsys_timeout=settings.nsys_timeout_s,
                           allow_missing_ranks=settings.window.allow_missing_ranks)
    if settings.gpu_model:
        from kbase.api.common import name_gpus

        name_gpus(profile, settings.gpu_model, path)
    return profile


def window(profile: Profile, settings: Settings | None = None) -> Window:
    """Stage 2: the launches of the settings' window (iterations after warm-up by default)."""
    from kbase.analysis.window import select_window

    return select_window(profile, (settings or Settings.load()).window)


def leaderboard(win: Window, *, per_gpu: bool = False, sketches: bool = False,
                kinds: list[KernelKind] | None = None, ops: bool | None = None) -> Leaderboard:
    """Stage 3: one row per kernel (or per GPU and kernel), a summary and per-iteration samples;
    ``sketches``: also each kernel's launch sketch (what the store and the diff use; ~0.1 s per 1M launches);
    ``kinds``: what each of the profile's names is (``analysis.classify.kinds_of``), when already at hand;
    ``ops``: also each kernel's split by the op that launched it (``Leaderboard.ops``; default: with the
    sketches, as the store and the diff use both), when the profile still has its launch columns."""
    op_columns = _ops(win) if (sketches if ops is None else ops) and not per_gpu else None
    return _leaderboard(win, per_gpu, sketches, kinds, op_columns)


def _leaderboard(win: Window, per_gpu: bool, sketches: bool, kinds: list[KernelKind] | None,
                 op_columns: OpColumns | None, budget: dict | None = None, samples: bool = True) -> Leaderboard:
    from kbase.analysis.leaderboard import build_leaderboard

    if not sketches or per_gpu:
        return build_leaderboard(win, per_gpu=per_gpu, kinds=kinds, ops=op_columns, budget=budget, samples=samples)
    from kbase.analysis.sketch import window_sketches_and_keys

    sk, keys = window_sketches_and_keys(win)  # its sort spares the leaderboard its own (0.7 s at 10M launches)
    lb = build_leaderboard(win, sorted_keys=keys, kinds=kinds, ops=op_columns, budget=budget)
    lb.sketches = sk
    return lb


def _ops(win: Window) -> OpColumns | None:
    """The op of each launch of the window (None: the profile records none)."""
    from kbase.analysis.ops import attribute_ops

    return attribute_ops(win.profile, win.mask, win.spec.marker)


def _board(path: Path, settings: Settings, progress: Progress | None, *, fmt: str | None = None,
           per_gpu: bool = False, sketches: bool = False, ops: bool | None = None,
           read_done: Callable[[], object] | None = None, samples: bool = True) -> Leaderboard:
    """read -> window -> leaderboard of a file, for a caller that keeps only the leaderboard; ``read_done``:
    called once the profile is read; ``samples``: False leaves the per-iteration samples empty (not with
    ``sketches``: a stored leaderboard keeps them)."""
    from kbase.analysis.classify import kinds_of
    from kbase.analysis.leaderboard import budget_of
    from kbase.readers.threads import Pool

    profile = read(path, settings, progress=progress, fmt=fmt)
    if read_done is not None:
        read_done()
    # The names are classified (regular expressions, in Python) on a second thread while this one selects the
    # window (numpy, which releases the GIL): the leaderboard then finds them done.
    with Pool(1) as pool:
        classified = pool.submit(kinds_of, profile.columns.names.tolist(), profile.short_names)
        win = window(profile, settings)
        kinds = classified.result()
    op_columns = _ops(win) if (sketches if ops is None else ops) and not per_gpu else None
    # the budget's idle gaps read the launch calls: computed before they go
    budget = None if per_gpu else budget_of(win, kinds).to_stored()
    # The launch columns served the window's iteration (and op) attribution only; the profile is ours alone
    # here, so they go before the leaderboard and sketches (16 bytes per launch off the peak: 153 MiB at 10M).
    win.profile.columns = dataclasses.replace(win.profile.columns, launch_tid=None, launch_start=None)
    return _leaderboard(win, per_gpu, sketches, kinds, op_columns, budget, samples or sketches)


def _profile_path(profile: Path | str | None, settings: Settings) -> Path:
    if profile is not None:
        return Path(profile)
    if settings.profile is None:
        raise InputError("no profile given (and no [tool.kbase] profile in pyproject.toml)")
    return settings.profile


def snapshot(profile: Path | str | None = None, settings: Settings | None = None, *, tags: list[str] | None = None,
             note: str = "", rev: str | None = None, no_git: bool = False, require_clean: bool = False,
             force: bool = False, progress: Progress | None = None, store: Store | None = None,
             branch: str | None = None, kind: str = "snapshot") -> SnapshotResult:
    """read -> window -> leaderboard -> store, at HEAD (or ``rev``) of the settings' repository. ``branch``: the
    branch to record (a CI checkout is detached, or on a merge commit: the pull request's branch), instead of
    the checked-out one. ``kind``: why it is stored (``bisect``: a midpoint ``kbase bisect`` captured).

    A file the store does not hold (``store.identity.look_up``; or any, with ``force``) is read before the store
    is opened for writing, the driver's modules importing meanwhile; one it most likely holds is checked by its
    sha256 first (no leaderboard is computed for a capture stored already)."""
    from kbase.gitrepo import commit_info
    from kbase.readers import detect_format
    from kbase.readers.source import describe_source, source_identity, unchanged_since
    from kbase.store.identity import find_stored, identity_key, look_up
    from kbase.store_urls import sqlite_path

    settings = settings or Settings.load()
    path = _profile_path(profile, settings)
    commit = commit_info(settings.repo, rev, no_git)
    if branch is not None:
        if len(branch) > 300 or any(ord(ch) < 32 for ch in branch):
            raise InputError("not a branch name (at most 300 characters, no control characters)", field="branch",
                             value=branch)
        commit = dataclasses.replace(commit, branch=branch)
    if require_clean and commit.dirty:
        raise InputError("working tree has uncommitted changes", field="require_clean", value=True)
    fmt = detect_format(path)
    wkey = settings.window.key()
    ident = source_identity(path)
    key = identity_key(commit.hash, ident, wkey)
    with look_up(settings, key, settings.workload, store) as got:
        decided, seen = got.decided, got.found
    if got.unreachable is not None:  # (not a second wait for a server that did not answer)
        raise got.unreachable
    if store is None and decided and (force or seen is None):
        # Read first, the driver's modules importing meanwhile; the store is opened, or created, only once the
        # profile has read cleanly. (Undecided — another schema, a foreign file: the store is opened first and
        # says what is wrong before a long read.)
        warm_imports("kbase.store.write.create", *(() if sqlite_path(settings.store_url()) else ("psycopg2",)))
        lb, source = _board_and_source(path, settings, progress, fmt, ident)
        return _save_direct(settings, lb, source, commit, wkey, tags, note, force, kind)
    with _store(settings, store) as st:
        if not decided:
            seen = find_stored(st.reader, key, settings.workload)
        if seen is not None and not force:  # most likely stored already: the full sha256 decides before any reading
            source = describe_source(path, fmt, ident)
            dup = st.reader.find_duplicate(settings.workload, commit.hash, source.sha256, wkey)
            if dup is not None:
                return SnapshotResult(baseline=dup, leaderboard=st.reader.leaderboard(dup), created=False)
            lb = _board(path, settings, progress, fmt=fmt, sketches=True)
            unchanged_since(path, ident)
        else:
            lb, source = _board_and_source(path, settings, progress, fmt, ident)
        return _save(st, lb, source, settings, commit, wkey, tags, note, force, kind)


def _board_and_source(path: Path, settings: Settings, progress: Progress | None, fmt: str,
                      ident: SourceIdentity) -> tuple[Leaderboard, SourceInfo]:
    """The leaderboard with sketches, and the file's description: its sha256 on a thread once the profile is
    read, beside the window and the leaderboard (hashing a 1.4 GB export alone takes ~1.2 s of CPU). Not while
    the pages are decoded: the decoder's threads and the hash then read the same bytes at once, and a 10M-launch
    read took ~0.2 s more CPU than with the hash after it (where every core is busy, as on a CI runner, the
    overlap saves no time either)."""
    from kbase.readers.source import BackgroundSource, unchanged_since

    hashing: list[BackgroundSource] = []
    lb = _board(path, settings, progress, fmt=fmt, sketches=True,
                read_done=lambda: hashing.append(BackgroundSource(path, fmt, ident)))
    source = hashing[0].result()
    unchanged_since(path, ident)  # what was read, hashed and identified is one state of the file
    return lb, source


class Baselines(Shown, list):  # of BaselineRecords; shows itself with render.notebook's formatters
    """Stored baselines, newest first: a list, plus each commit's subject and date (``commit_notes``, from git,
    read on first use) and ``table``, a DataFrame of what ``kbase list --format json`` states of each."""

    def __init__(self, rows: list[BaselineRecord], repo: Path | None = None) -> None:
        super().__init__(rows)
        self._repo = repo
        self._notes: dict[str, CommitNote] | None = None

    @property
    def commit_notes(self) -> dict[str, CommitNote]:
        if self._notes is None:
            from kbase.gitrepo import describe_commits

            self._notes = describe_commits(self._repo, [b.commit for b in self])
        return self._notes

    def records(self) -> list[dict]:
        """One dict per baseline, as ``kbase list --format json`` writes it (``subject``, ``commit_date``)."""
        from kbase.render.baselines import baseline_dict

        notes = self.commit_notes
        return [baseline_dict(b, notes.get(b.commit)) for b in self]

    @property
    def table(self) -> pd.DataFrame:
        """The baselines as a DataFrame (pandas is imported here, on first use)."""
        import pandas as pd

        from kbase.render.baselines import LIST_FIELDS

        df = pd.DataFrame(self.records(), columns=LIST_FIELDS)
        for col in ("created_at", "commit_date"):
            df[col] = pd.to_datetime(df[col], utc=True, format="ISO8601")
        return df


def baselines(settings: Settings | None = None, *, workload: str | None = None, branch: str | None = None,
              commit: str | None = None, limit: int | None = 50, store: Store | None = None) -> Baselines:
    """Stored baselines, newest first, of ``workload`` (default: the settings' when the user named one, else
    every workload), as ``BaselineRecord``s in a ``Baselines`` list (``.table``, ``.commit_notes``)."""
    from kbase.errors import SettingsError
    from kbase.store.schema.errors import NoStoreError

    settings = settings or Settings.load()
    if limit is not None and not 0 <= limit <= 2**62:
        raise SettingsError("must be a count of baselines (0 or more)", field="limit", value=limit)
    if workload is None and settings.workload_given:
        workload = settings.workload
    with contextlib.suppress(NoStoreError), _store(settings, store, readonly=True) as st:
        if workload is not None:  # a named workload the store does not hold: a typo, said as one (exit 2)
            names = st.reader.workloads()
            if names and workload not in names:
                raise unknown_workload(workload, names)
        return Baselines(st.reader.list_baselines(workload=workload, branch=branch, commit_prefix=commit, limit=limit),
                         settings.repo)
    return Baselines([], settings.repo)


@dataclass(repr=False)
class StoredLeaderboard(Shown):  # shows itself with render.notebook's formatters
    baseline: BaselineRecord
    leaderboard: LeaderboardRows  # as every read of a stored leaderboard returns it


def baseline(ref: str, settings: Settings | None = None, *, store: Store | None = None) -> StoredLeaderboard:
    """One stored leaderboard: ``@ID`` or a git revision (its newest baseline of the workload), read without
    SQLAlchemy or pandas."""
    from kbase.api.common import workload_for
    from kbase.comparison.resolve import RefKind, parse_ref, resolve_baseline

    settings = settings or Settings.load()
    parsed = parse_ref(ref, profiles=False)
    with _store(settings, store, readonly=True) as st:
        workload = settings.workload if parsed.kind == RefKind.BASELINE else workload_for(settings, st.reader)
        b = resolve_baseline(parsed, st.reader, workload=workload, repo=settings.repo)
        if parsed.kind == RefKind.BASELINE:
            check_baseline_workload(ref, b.workload, settings)
        return StoredLeaderboard(baseline=b, leaderboard=st.reader.leaderboard(b))


def remove(baseline_id: int, settings: Settings | None = None, *,
           confirm: Callable[[BaselineRecord], bool] | None = None,
           store: Store | None = None) -> BaselineRecord | None:
    """Delete one baseline by id; ``confirm(baseline)`` may veto (then None is returned)."""
    from kbase.store.write.queries import delete_baseline

    settings = settings or Settings.load()
    with _store(settings, store) as st:
        b = st.reader.baseline(baseline_id)
        if confirm is not None and not confirm(b):
            return None
        return delete_baseline(st, baseline_id)
