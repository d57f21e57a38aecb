"""The front door: every kbase pipeline, as one call each. The CLI is parse -> one call here -> render.

    import kbase

    settings = kbase.Settings.load(db="sqlite:///kbase.db", name="train-8gpu")
    lb = kbase.top("train.sqlite", settings)               # read -> window -> leaderboard
    kbase.snapshot("train.sqlite", settings)               # ... -> store at HEAD
    result = kbase.gate("HEAD~1", "HEAD", settings)        # resolve -> diff -> decide
    result.verdict.code                                    # 0 pass, 1 regression, 2 incomparable

Stages, each a typed function of its own package: ``readers.read_profile`` -> ``analysis.window.
select_window`` -> ``analysis.leaderboard.build_leaderboard`` -> ``store.queries.save_leaderboard`` ->
``compare.diff.compute_diff`` -> ``compare.gate.decide`` -> ``render``. Functions that touch the store
take an open ``Store`` or open (and close) the one ``settings`` names.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbase.errors import InputError
from kbase.settings import Settings

if TYPE_CHECKING:

    from kbase.analysis.leaderboard import Leaderboard
    from kbase.analysis.window import Window
    from kbase.comparison.changepoints import KernelStep
    from kbase.comparison.diff import DiffResult
    from kbase.comparison.gate import Verdict
    from kbase.comparison.history import StepsReport
    from kbase.comparison.resolve import Resolved
    from kbase.readers.profile import Profile
    from kbase.store.engine import Store
    from kbase.store.models import Acceptance, Baseline

Progress = Callable[[int, int], None]  # (rows read now, rows in all), as a large export streams


# ------------------------------------------------------------------------------------------ stages


def read(path: Path | str, settings: Settings | None = None, *, progress: Progress | None = None,
         fmt: str | None = None) -> Profile:
    """Stage 1: a profile file (or per-rank trace directory) as DataFrames (``readers.profile``);
    ``fmt`` skips format detection when the caller already did it."""
    from kbase.readers import read_profile

    settings = settings or Settings.load()
    return read_profile(Path(path), progress=progress, fmt=fmt, nsys_timeout=settings.nsys_timeout_s,
                        allow_missing_ranks=settings.window.allow_missing_ranks)


def window(profile: Profile, settings: Settings | None = None) -> Window:
    """Stage 2: the launches of the settings' window (iterations after warm-up by default)."""
    from kbase.analysis.window import select_window

    return select_window(profile, (settings or Settings.load()).window)


def leaderboard(win: Window, *, per_gpu: bool = False, sketches: bool = False) -> Leaderboard:
    """Stage 3: one row per kernel (or per GPU and kernel), a summary and per-iteration samples;
    ``sketches``: also each kernel's launch sketch (what the store and the diff use; ~0.4 s per 1M launches)."""
    from kbase.analysis.leaderboard import build_leaderboard
    from kbase.comparison.sketch import window_sketches

    lb = build_leaderboard(win, per_gpu=per_gpu)
    if sketches and not per_gpu:
        lb.sketches = window_sketches(win)
    return lb


def top(profile: Path | str | None = None, settings: Settings | None = None, *, per_gpu: bool = False,
        progress: Progress | None = None, sketches: bool = False, from_store: bool = False) -> Leaderboard:
    """read -> window -> leaderboard of a profile (default: the settings' ``profile``). ``from_store``:
    first look for this very file stored at the current commit with the same window (``stored_top``)."""
    settings = settings or Settings.load()
    path = _profile_path(profile, settings)
    if from_store and not per_gpu and not sketches:
        stored = stored_top(path, settings)
        if stored is not None:
            return stored
    return leaderboard(window(read(path, settings, progress=progress), settings), per_gpu=per_gpu, sketches=sketches)


def stored_top(profile: Path | str, settings: Settings | None = None) -> Leaderboard | None:
    """The stored leaderboard of ``profile`` when a baseline of this file was taken at the current commit
    with the same window settings by this kbase version, else None. A cheap identity check (size, mtime
    and a hash of the first and last 64 KiB, no full read) finds it; nothing is created or migrated."""
    from kbase.store.identity import stored_leaderboard_of

    return stored_leaderboard_of(Path(profile), settings or Settings.load())


def _profile_path(profile: Path | str | None, settings: Settings) -> Path:
    if profile is not None:
        return Path(profile)
    if settings.profile is None:
        raise InputError("no profile given (and no [tool.kbase] profile in pyproject.toml)")
    return settings.profile


# ------------------------------------------------------------------------------------------ store


@contextlib.contextmanager
def _store(settings: Settings, store: Store | None, readonly: bool = False) -> Iterator[Store]:
    """The given store, or the settings' store opened for this call and closed after it (``readonly``:
    a command that only reads never creates a store: ``NoStoreError`` instead)."""
    if store is not None:
        yield store
        return
    from kbase.store.engine import open_store

    opened = open_store(settings, readonly=readonly)
    try:
        yield opened
    finally:
        opened.close()


@dataclass
class SnapshotResult:
    baseline: Baseline
    leaderboard: Leaderboard
    created: bool  # False: an identical baseline (same file, window and commit) already existed


def snapshot(profile: Path | str | None = None, settings: Settings | None = None, *, tags: list[str] | None = None,
             note: str = "", rev: str | None = None, no_git: bool = False, require_clean: bool = False,
             force: bool = False, progress: Progress | None = None, store: Store | None = None) -> SnapshotResult:
    """read -> window -> leaderboard -> store, at HEAD (or ``rev``) of the settings' repository."""
    from kbase import __version__
    from kbase.gitrepo import commit_info
    from kbase.readers import detect_format
    from kbase.readers.source import BackgroundSource, describe_source, source_identity
    from kbase.store.queries import find_by_identity, find_duplicate, load_leaderboard, save_leaderboard

    settings = settings or Settings.load()
    path = _profile_path(profile, settings)
    commit = commit_info(settings.repo, rev, no_git)
    if require_clean and commit.dirty:
        raise InputError("working tree has uncommitted changes", field="require_clean", value=True)
    fmt = detect_format(path)
    wkey = settings.window.key()
    with _store(settings, store) as st:
        ident = source_identity(path)
        seen = None if force else find_by_identity(st.engine, commit.hash, ident.size, ident.mtime_ns, ident.probe,
                                                   wkey, __version__, settings.workload)
        if seen is not None:  # most likely stored already: the full sha256 decides before any reading
            source = describe_source(path, fmt, ident)
            dup = find_duplicate(st.engine, settings.workload, commit.hash, source.sha256, wkey)
            if dup is not None and dup.id is not None:
                return SnapshotResult(baseline=dup, leaderboard=load_leaderboard(st.engine, dup.id), created=False)
            lb = leaderboard(window(read(path, settings, progress=progress, fmt=fmt), settings), sketches=True)
        else:  # the sha256 in a thread while the reader parses (hashing a 1.4 GB export alone took 1.5-1.8 s)
            hashing = BackgroundSource(path, fmt, ident)
            lb = leaderboard(window(read(path, settings, progress=progress, fmt=fmt), settings), sketches=True)
            source = hashing.result()
            dup = None if force else find_duplicate(st.engine, settings.workload, commit.hash, source.sha256, wkey)
            if dup is not None and dup.id is not None:  # same bytes stored with another mtime
                return SnapshotResult(baseline=dup, leaderboard=load_leaderboard(st.engine, dup.id), created=False)
        saved = save_leaderboard(st.engine, lb, workload=settings.workload, commit=commit, source=source,
                                 window_spec=wkey, tags=tags, note=note, url=st.url, force=force)
        if not saved.created and saved.baseline.id is not None:  # a concurrent snapshot stored it first
            lb = load_leaderboard(st.engine, saved.baseline.id)
        return SnapshotResult(baseline=saved.baseline, leaderboard=lb, created=saved.created)


def baselines(settings: Settings | None = None, *, workload: str | None = None, branch: str | None = None,
              commit: str | None = None, limit: int | None = 50, store: Store | None = None) -> list[Baseline]:
    """Stored baselines, newest first (of ``workload`` when given)."""
    from kbase.errors import SettingsError
    from kbase.store.engine import NoStoreError
    from kbase.store.queries import list_baselines

    settings = settings or Settings.load()
    if limit is not None and not 0 <= limit <= 2**62:
        raise SettingsError("must be a count of baselines (0 or more)", field="limit", value=limit)
    with contextlib.suppress(NoStoreError), _store(settings, store, readonly=True) as st:
        return list_baselines(st.engine, workload=workload, branch=branch, commit_prefix=commit, limit=limit)
    return []


@dataclass
class StoredLeaderboard:
    baseline: Baseline
    leaderboard: Leaderboard


def baseline(ref: str, settings: Settings | None = None, *, store: Store | None = None) -> StoredLeaderboard:
    """One stored leaderboard: ``@ID`` or a git revision (its newest baseline of the workload)."""
    from kbase.comparison.resolve import parse_ref, resolve_baseline
    from kbase.store.queries import load_leaderboard

    settings = settings or Settings.load()
    with _store(settings, store, readonly=True) as st:
        b = resolve_baseline(parse_ref(ref, profiles=False), st.engine, workload=settings.workload,
                             repo=settings.repo)
        assert b.id is not None
        return StoredLeaderboard(baseline=b, leaderboard=load_leaderboard(st.engine, b.id))


def remove(baseline_id: int, settings: Settings | None = None, *,
           confirm: Callable[[Baseline], bool] | None = None, store: Store | None = None) -> Baseline | None:
    """Delete one baseline by id; ``confirm(baseline)`` may veto (then None is returned)."""
    from kbase.store.queries import delete_baseline, get_baseline

    settings = settings or Settings.load()
    with _store(settings, store) as st:
        b = get_baseline(st.engine, baseline_id)
        if confirm is not None and not confirm(b):
            return None
        delete_baseline(st.engine, baseline_id, st.url)
        return b


@dataclass
class KernelHistory:
    query: str  # what was asked for
    name: str  # the one stored kernel it names (full demangled name)
    short_name: str
    rows: list[dict[str, Any]]  # one record per baseline holding it, oldest first (plain rows: no pandas)


def find_kernel(query: str, settings: Settings | None = None, *, workload: str | None = None,
                store: Store | None = None) -> tuple[str, str]:
    """The stored kernel a person's ``query`` names — exact, short name, ``#id``, family, substring or
    regex (``analysis.lookup``): (full name, short name); ``KernelNotFound`` (with suggestions) or
    ``AmbiguousKernel`` (with the candidates) otherwise."""
    from kbase.analysis.lookup import find_kernel as lookup
    from kbase.store.queries import kernel_names

    settings = settings or Settings.load()
    with _store(settings, store, readonly=True) as st:
        names, shorts = kernel_names(st.engine, workload)
    k = lookup(query, names, shorts)
    return k.name, k.short


def history(kernel: str, settings: Settings | None = None, *, workload: str | None = None,
            branch: str | None = None, store: Store | None = None) -> KernelHistory:
    """One kernel (any name ``find_kernel`` accepts) across every stored baseline, oldest first (of
    ``workload`` / ``branch`` when given)."""
    from kbase.store.queries import kernel_history_rows

    settings = settings or Settings.load()
    with _store(settings, store, readonly=True) as st:
        name, short = find_kernel(kernel, settings, workload=workload, store=st)
        rows = kernel_history_rows(st.engine, name, workload, branch).records()
        return KernelHistory(query=kernel, name=name, short_name=short, rows=rows)


def steps(settings: Settings | None = None, *, workload: str | None = None, last: int = 50, rev: str = "HEAD",
          store: Store | None = None) -> StepsReport:
    """Step changes (and creeps) of every kernel over the last ``last`` baselines of a workload on the
    first-parent line ending at ``rev``, largest effect on the iteration first."""
    from kbase.comparison.history import steps_report

    settings = settings or Settings.load()
    with _store(settings, store, readonly=True) as st:
        return steps_report(st.engine, workload or settings.workload, settings.repo, last=last, rev=rev)


def history_steps(h: KernelHistory) -> list[KernelStep]:
    """Steps and creeps in one kernel's history (one workload and branch)."""
    from kbase.comparison.changepoints import kernel_history_steps

    return kernel_history_steps([r["per_iter_ns"] for r in h.rows], [str(r["commit"]) for r in h.rows])


def report(out: Path | str, settings: Settings | None = None, *, workload: str | None = None,
           branch: str | None = None, last: int | None = None, before: int = -2, after: int = -1,
           overwrite: bool = False, store: Store | None = None) -> list[Path]:
    """The static HTML report of a workload's history (``last`` commits), the diff of the commits at
    positions ``before`` -> ``after`` (the latest pair by default) and the leaderboard of ``after``,
    with detected steps marked; written into ``out``. Returns the pages written (index first)."""
    from kbase.render.report import build_report
    from kbase.render.report.data import load_report
    from kbase.render.report.steps import find_steps

    settings = settings or Settings.load()
    with _store(settings, store, readonly=True) as st:
        data = load_report(st.engine, workload, branch=branch, subjects_from=settings.repo, before=before,
                           after=after, find_steps=find_steps, policy=settings.policy, limit_commits=last)
    return build_report(data, Path(out), overwrite=overwrite)


# ------------------------------------------------------------------------------------------ compare


@dataclass
class Comparison:
    result: DiffResult
    before: Resolved
    after: Resolved
    notes: list[str] = field(default_factory=list)


def _pair(before: str | None, after: str | None, settings: Settings, base_ref: str | None,
          default_before: str) -> tuple[str, str, list[str]]:
    if base_ref is not None:
        from kbase.gitrepo import merge_base, open_repo

        head = after or before or "HEAD"
        mb = merge_base(open_repo(settings.repo), base_ref, head)
        return mb, head, [f"base ref {base_ref}: comparing against merge-base {mb[:12]}"]
    if before is None:
        return default_before, after or "HEAD", []
    return before, after or "HEAD", []


def _resolve(text: str, settings: Settings, st: Callable[[], Store], strict: bool) -> Resolved:
    from kbase.comparison.resolve import RefKind, Resolved, parse_ref, resolve_stored
    from kbase.comparison.side import SideMeta, side_from_leaderboards

    ref = parse_ref(text)
    if ref.kind == RefKind.PROFILE:
        lb = top(ref.path, settings, sketches=True)
        meta = SideMeta(workload=settings.workload, gpu_models=",".join(lb.summary.gpu_models),
                        gpu_count=int(lb.summary.gpus), window_spec=settings.window.key())
        label = f"{text} (profile, not stored)"
        return Resolved(side=side_from_leaderboards([lb], label, meta), commit=None, label=label)
    return resolve_stored(ref, st().engine, workload=settings.workload, repo=settings.repo, strict=strict)


def compare(before: str | None = None, after: str | None = None, settings: Settings | None = None, *,
            base_ref: str | None = None, strict: bool = False, store: Store | None = None) -> Comparison:
    """resolve both sides (git revisions, ``@ID`` or profile files) -> diff per iteration."""
    settings = settings or Settings.load()
    a, b, notes = _pair(before, after, settings, base_ref, default_before=before or "HEAD~1")
    return _compare(a, b, settings, notes, strict, store)


def _compare(a: str, b: str, settings: Settings, notes: list[str], strict: bool, store: Store | None) -> Comparison:
    from kbase.comparison.diff import compute_diff
    from kbase.comparison.history import noise_from_history

    with contextlib.ExitStack() as stack:
        opened: list[Store] = [store] if store is not None else []

        def get_store() -> Store:
            if not opened:
                opened.append(stack.enter_context(_store(settings, None, readonly=True)))
            return opened[0]

        first = _resolve(a, settings, get_store, strict)
        second = _resolve(b, settings, get_store, strict)
        _check_distinct(a, b, first, second)
        noise, why = noise_from_history(get_store().engine, settings.policy, settings.repo, first, second) \
            if first.baseline_ids else (None, [])
        result = compute_diff(first.side, second.side, settings.policy, history=noise)
        return Comparison(result=result, before=first, after=second,
                          notes=notes + first.notes + second.notes + why)


def _check_distinct(a: str, b: str, first: Resolved, second: Resolved) -> None:
    """Both sides resolving to the same stored baseline (say a revision without a baseline falling back to
    its nearest ancestor) would compare a capture with itself: refused whatever the options."""
    from kbase.errors import IncomparableError

    shared = sorted(set(first.baseline_ids))
    if shared and set(first.baseline_ids) == set(second.baseline_ids):
        ids = ", ".join(f"@{i}" for i in shared)
        why = "; ".join(first.notes + second.notes)
        raise IncomparableError(f"{a} and {b} resolve to the same baseline {ids}: nothing to compare"
                                + (f" ({why})" if why else ""))


@dataclass
class GateResult:
    comparison: Comparison
    verdict: Verdict


def gate(before: str | None = None, after: str | None = None, settings: Settings | None = None, *,
         base_ref: str | None = None, strict: bool = False, allow_incomparable: bool = False,
         warn_only: bool = False, today: date | None = None, store: Store | None = None) -> GateResult:
    """compare (default ``HEAD~1`` vs ``HEAD``) -> decide, with the acceptances of the compared range."""
    from kbase.comparison.gate import active_acceptances, decide

    settings = settings or Settings.load()
    a, b, notes = _pair(before, after, settings, base_ref, default_before="HEAD~1")
    with contextlib.ExitStack() as stack:
        st = store
        if st is None and not all(_is_profile(x) for x in (a, b)):
            st = stack.enter_context(_store(settings, None, readonly=True))
        comparison = _compare(a, b, settings, notes, strict, st)
        accepted: list[Acceptance] = []
        if st is not None and comparison.after.commit:
            from kbase.store.queries import list_acceptances

            accepted = active_acceptances(list_acceptances(st.engine, comparison.after.side.meta.workload),
                                          today=today, in_range=_range_check(settings, comparison))
    verdict = decide(comparison.result, accepted, allow_incomparable=allow_incomparable, warn_only=warn_only)
    return GateResult(comparison=comparison, verdict=verdict)


def _is_profile(text: str) -> bool:
    from kbase.comparison.resolve import RefKind, parse_ref

    return parse_ref(text).kind == RefKind.PROFILE


def _range_check(settings: Settings, comparison: Comparison) -> Callable[[str], bool]:
    """An acceptance applies when its commit lies in (before, after]."""
    from kbase.gitrepo import open_repo

    before_commit, after_commit = comparison.before.commit, comparison.after.commit
    try:
        r = open_repo(settings.repo)
    except InputError:
        return lambda c: c == after_commit

    def in_range(c: str) -> bool:
        try:
            if not r.is_ancestor(c, after_commit):
                return False
            return before_commit is None or not r.is_ancestor(c, before_commit)
        except Exception:  # noqa: BLE001 - unknown commit in a shallow clone: exact match only
            return c == after_commit

    return in_range


# ------------------------------------------------------------------------------------------ acceptances


def kernel_pattern(text: str, settings: Settings | None = None, *, store: Store | None = None) -> str:
    """A glob or ``/regex/`` as given; a plain name or ``#id`` is looked up (``find_kernel``) and
    becomes the exact pattern of the one stored kernel it names (``lookup.exact_pattern``)."""
    from kbase.analysis.lookup import exact_pattern, is_pattern

    if is_pattern(text):
        return text
    settings = settings or Settings.load()
    return exact_pattern(find_kernel(text, settings, workload=settings.workload, store=store)[0])


def accept(pattern: str, *, rev: str, reason: str, expires: date | None = None, settings: Settings | None = None,
           store: Store | None = None) -> Acceptance:
    """Acknowledge a known regression: the gate lists matching regressions in ``(before, after]`` ranges
    containing ``rev`` as accepted, not failing, until ``expires``. ``pattern``: a glob, ``/regex/``, or
    a kernel name / ``#id`` (``kernel_pattern``)."""
    from kbase.comparison.policy import check_pattern
    from kbase.gitrepo import author, open_repo, resolve_commit
    from kbase.store.models import Acceptance
    from kbase.store.queries import add_acceptance

    settings = settings or Settings.load()
    check_pattern(pattern, "pattern")
    if not reason.strip():
        raise InputError("must not be empty", field="reason", value=reason)
    commit = resolve_commit(open_repo(settings.repo), rev).hexsha
    with _store(settings, store) as st:
        pattern = kernel_pattern(pattern, settings, store=st)
    row = Acceptance(workload=settings.workload, pattern=pattern, commit=commit, reason=reason,
                     author=author(settings.repo), expires=expires)
    with _store(settings, store) as st:
        return add_acceptance(st.engine, row, st.url)


def acceptances(settings: Settings | None = None, *, all_workloads: bool = False, active_on: date | None = None,
                store: Store | None = None) -> list[Acceptance]:
    """Stored acceptances of the settings' workload (or all), optionally only those active on a date."""
    from kbase.store.engine import NoStoreError
    from kbase.store.queries import list_acceptances

    settings = settings or Settings.load()
    with contextlib.suppress(NoStoreError), _store(settings, store, readonly=True) as st:
        return list_acceptances(st.engine, None if all_workloads else settings.workload, active_on)
    return []


def revoke(acceptance_id: int, settings: Settings | None = None, *, store: Store | None = None) -> Acceptance:
    """Remove one acceptance: the gate fails on its regressions again."""
    from kbase.store.queries import delete_acceptance

    settings = settings or Settings.load()
    with _store(settings, store) as st:
        return delete_acceptance(st.engine, acceptance_id, st.url)


__all__ = ["Comparison", "GateResult", "KernelHistory", "Settings", "SnapshotResult", "StoredLeaderboard", "accept",
           "acceptances", "baseline", "baselines", "compare", "find_kernel", "gate", "history", "history_steps",
           "kernel_pattern", "leaderboard", "read", "remove", "report", "revoke", "snapshot", "steps", "stored_top",
           "top", "window"]
