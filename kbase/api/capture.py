"""Front door, capture side: read -> window -> leaderboard of a profile, and storing it (snapshot,
baselines, baseline, remove)."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

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
    from kbase.store.fast_read import FastReader
    from kbase.store.models import Baseline
    from kbase.store.reader import StoreReader
    from kbase.store.records import BaselineRecord

    AnyBaseline = Baseline | BaselineRecord  # a model, or the read-only path's record of it
    AnyLeaderboard = Leaderboard | LeaderboardRows  # computed, or stored rows (``analysis.board``)



from kbase.api.common import Progress, _fast_read, _store, check_baseline_workload, unknown_workload, warm_imports
from kbase.api.storing import SnapshotResult, _save, _save_direct, read_before_store

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
                 op_columns: OpColumns | None, budget: dict | None = None) -> Leaderboard:
    from kbase.analysis.leaderboard import build_leaderboard

    if not sketches or per_gpu:
        return build_leaderboard(win, per_gpu=per_gpu, kinds=kinds, ops=op_columns, budget=budget)
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
           read_done: Callable[[], object] | None = None) -> Leaderboard:
    """read -> window -> leaderboard of a file, for a caller that keeps only the leaderboard; ``read_done``:
    called once the profile is read."""
    from concurrent.futures import ThreadPoolExecutor

    from kbase.analysis.classify import kinds_of
    from kbase.analysis.leaderboard import budget_of

    profile = read(path, settings, progress=progress, fmt=fmt)
    if read_done is not None:
        read_done()
    # The names are classified (regular expressions, in Python) on a second thread while this one selects the
    # window (numpy, which releases the GIL): the leaderboard then finds them done.
    with ThreadPoolExecutor(max_workers=1) as pool:
        classified = pool.submit(kinds_of, profile.columns.names.tolist(), profile.short_names)
        win = window(profile, settings)
        kinds = classified.result()
    op_columns = _ops(win) if (sketches if ops is None else ops) and not per_gpu else None
    # the budget's idle gaps read the launch calls: computed before they go
    budget = None if per_gpu else budget_of(win, kinds).to_stored()
    # The launch columns served the window's iteration (and op) attribution only; the profile is ours alone
    # here, so they go before the leaderboard and sketches (16 bytes per launch off the peak: 153 MiB at 10M).
    win.profile.columns = dataclasses.replace(win.profile.columns, launch_tid=None, launch_start=None)
    return _leaderboard(win, per_gpu, sketches, kinds, op_columns, budget)


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
    the checked-out one. ``kind``: why it is stored (``bisect``: a midpoint ``kbase bisect`` captured)."""
    from kbase.gitrepo import commit_info
    from kbase.readers import detect_format
    from kbase.readers.source import describe_source, source_identity, unchanged_since
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
    if store is None and read_before_store(settings, commit.hash, ident, wkey, force=force):
        # Read first, the driver's modules importing meanwhile; the store is opened, or created, only once the
        # profile has read cleanly.
        warm_imports("kbase.store.create", *(() if sqlite_path(settings.store_url()) else ("psycopg",)))
        lb, source = _board_and_source(path, settings, progress, fmt, ident)
        return _save_direct(settings, lb, source, commit, wkey, tags, note, force, kind)
    from kbase.store.queries import load_leaderboard
    from kbase.store.reader import EngineReader
    from kbase.version import __version__

    with _store(settings, store) as st:
        reader = EngineReader(st.engine)
        seen = None if force or ident.probe is None else reader.find_by_identity(
            commit.hash, ident.probe, ident.size, ident.mtime_ns, wkey, __version__, settings.workload)
        if seen is not None:  # most likely stored already: the full sha256 decides before any reading
            source = describe_source(path, fmt, ident)
            dup = reader.find_duplicate(settings.workload, commit.hash, source.sha256, wkey)
            if dup is not None and dup.id is not None:
                return SnapshotResult(baseline=dup, leaderboard=load_leaderboard(st.engine, dup.id), created=False)
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


class Baselines(list):  # of Baseline models or BaselineRecords, as read
    """Stored baselines, newest first: a list, plus each commit's subject and date (``commit_notes``, from git,
    read on first use) and ``table``, a DataFrame of what ``kbase list --format json`` states of each."""

    def __init__(self, rows: list[Baseline] | list[BaselineRecord], repo: Path | None = None) -> None:
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

    def __repr__(self) -> str:
        from kbase.render.notebook import baselines_line

        return baselines_line(self)

    def _repr_html_(self) -> str:
        from kbase.render.notebook import baselines_html

        return baselines_html(self, self.commit_notes)


def baselines(settings: Settings | None = None, *, workload: str | None = None, branch: str | None = None,
              commit: str | None = None, limit: int | None = 50, store: Store | None = None) -> Baselines:
    """Stored baselines, newest first, of ``workload`` (default: the settings' when the user named one, else
    every workload): ``Baseline`` models, or (read from a store at the head schema without SQLAlchemy:
    ``store.fast_read``) read-only ``BaselineRecord``s with the same fields, in a ``Baselines`` list (``.table``,
    ``.commit_notes``)."""
    from kbase.errors import SettingsError

    settings = settings or Settings.load()
    if limit is not None and not 0 <= limit <= 2**62:
        raise SettingsError("must be a count of baselines (0 or more)", field="limit", value=limit)
    if workload is None and settings.workload_given:
        workload = settings.workload

    def listed(rd: StoreReader) -> list:
        if workload is not None:  # a named workload the store does not hold: a typo, said as one (exit 2)
            names = rd.workloads()
            if names and workload not in names:
                raise unknown_workload(workload, names)
        return rd.list_baselines(workload=workload, branch=branch, commit_prefix=commit, limit=limit)

    fast = _fast_read(settings, store, listed)
    if fast is not None:
        return Baselines(fast, settings.repo)
    from kbase.store.engine import NoStoreError
    from kbase.store.reader import EngineReader

    with contextlib.suppress(NoStoreError), _store(settings, store, readonly=True) as st:
        return Baselines(listed(EngineReader(st.engine)), settings.repo)
    return Baselines([], settings.repo)


@dataclass
class StoredLeaderboard:
    baseline: AnyBaseline  # a ``Baseline``; its read-only record when read through the fast path
    leaderboard: AnyLeaderboard  # a ``Leaderboard``; its rows when read through the fast path

    def __repr__(self) -> str:
        from kbase.render.notebook import stored_line

        return stored_line("StoredLeaderboard", self.baseline, self.leaderboard)

    def _repr_html_(self) -> str:
        from kbase.render.notebook import stored_html

        return stored_html("StoredLeaderboard", self.baseline, self.leaderboard)


def baseline(ref: str, settings: Settings | None = None, *, stored_rows: bool = False,
             store: Store | None = None) -> StoredLeaderboard:
    """One stored leaderboard: ``@ID`` or a git revision (its newest baseline of the workload).
    ``stored_rows``: an ``@ID`` in a store at the head schema is read without SQLAlchemy or pandas
    (``kbase show``), as a ``BaselineRecord`` and ``LeaderboardRows`` (what the renderers take); anything
    else (a revision, a missing id, another store) as a ``Baseline`` and ``Leaderboard``."""
    settings = settings or Settings.load()
    token = ref[1:] if ref.startswith("@") else ""
    if stored_rows and token.isdigit() and token.isascii() and len(token) <= 18:  # (< 2^63; any other: resolve says)

        def read(rd: FastReader) -> StoredLeaderboard | None:
            b = rd.get_baseline(int(token))
            if b is not None:
                check_baseline_workload(ref, b.workload, settings)
            return None if b is None else StoredLeaderboard(baseline=b, leaderboard=rd.leaderboard_rows(b))

        fast = _fast_read(settings, store, read)
        if fast is not None:
            return fast
    from kbase.api.common import workload_for
    from kbase.comparison.resolve import RefKind, parse_ref, resolve_baseline
    from kbase.store.queries import load_leaderboard
    from kbase.store.reader import EngineReader

    parsed = parse_ref(ref, profiles=False)
    with _store(settings, store, readonly=True) as st:
        workload = settings.workload if parsed.kind == RefKind.BASELINE else workload_for(settings,
                                                                                           EngineReader(st.engine))
        b = resolve_baseline(parsed, st.engine, workload=workload, repo=settings.repo)
        assert b.id is not None
        if parsed.kind == RefKind.BASELINE:
            check_baseline_workload(ref, b.workload, settings)
        return StoredLeaderboard(baseline=b, leaderboard=load_leaderboard(st.engine, b.id))


def remove(baseline_id: int, settings: Settings | None = None, *,
           confirm: Callable[[Baseline], bool] | None = None, store: Store | None = None) -> Baseline | None:
    """Delete one baseline by id; ``confirm(baseline)`` may veto (then None is returned)."""
    from kbase.store.queries import delete_baseline
    from kbase.store.reader import EngineReader

    settings = settings or Settings.load()
    with _store(settings, store) as st:
        b = EngineReader(st.engine).baseline(baseline_id)
        if confirm is not None and not confirm(b):
            return None
        delete_baseline(st.engine, baseline_id, st.url)
        return b


