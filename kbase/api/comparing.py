"""Front door, comparison side: compare (diff), gate, and the acceptances the gate honours.

A comparison reads, then computes: both sides resolved and their captures loaded (``comparison.resolve``), the
history its noise model uses and the acceptances in force (``comparison.reads``), into ``comparison.inputs``
values; then ``comparison.compare`` pools, diffs and decides on them with the settings' ``ComparisonPolicy``
alone (``Settings.comparison_policy``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import date
from typing import TYPE_CHECKING

from kbase.comparison.result import Comparison, GateResult
from kbase.errors import InputError
from kbase.settings import Settings

if TYPE_CHECKING:
    from kbase.comparison.inputs import ComparisonInputs, SideInputs
    from kbase.store.engine import Store
    from kbase.store.read.reader import StoreReader
    from kbase.store.schema.records import AcceptanceRecord



from kbase.api.common import _store, check_baseline_workload, with_workload, workload_for

# ------------------------------------------------------------------------------------------ compare


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


def _read_side(text: str, settings: Settings, st: Callable[[], StoreReader], strict: bool) -> SideInputs:
    """One side, read: a profile's leaderboard (computed, not stored) or the stored baselines it names."""
    from kbase.analysis.capture import capture_of_leaderboard
    from kbase.comparison.inputs import SideInputs
    from kbase.comparison.resolve import RefKind, parse_ref, read_stored
    from kbase.comparison.side import SideMeta

    ref = parse_ref(text)
    if ref.kind == RefKind.PROFILE:
        from kbase.api.top_answer import top  # here: a stored side needs none of the capture path

        lb = top(ref.path, settings, sketches=True)
        meta = SideMeta(workload=settings.workload, gpu_models=",".join(lb.summary.gpu_models),
                        gpu_count=int(lb.summary.gpus), window_spec=settings.window.key())
        label = f"{text} (profile, not stored)"
        return SideInputs(label=label, captures=(capture_of_leaderboard(lb),), meta=meta)
    return read_stored(ref, st(), workload=settings.workload, repo=settings.repo, strict=strict)


def compare(before: str | None = None, after: str | None = None, settings: Settings | None = None, *,
            base_ref: str | None = None, strict: bool = False, history_ref: str | None = None,
            store: Store | None = None) -> Comparison:
    """resolve both sides (git revisions, ``@ID`` or profile files) -> diff per iteration. History noise
    comes from the first-parent line of ``history_ref`` (an unknown revision: an ``InputError``), else
    ``base_ref``, else the policy's ``history_ref`` (unknown: a note), else the before side."""
    from kbase.comparison.compare import compare as compute

    settings = settings or Settings.load()
    a, b, notes = _pair(before, after, settings, base_ref, default_before=before or "HEAD~1")
    with contextlib.ExitStack() as stack:
        inputs, _ = _read_inputs(a, b, settings, notes, strict, _opener(settings, store, stack), base_ref,
                                 history_ref)
    return compute(inputs, settings.comparison_policy())


def _opener(settings: Settings, store: Store | None, stack: contextlib.ExitStack) -> Callable[[], StoreReader]:
    """The store's reader, ``store`` or the settings' opened read-only on the first call (in ``stack``)."""
    opened: list[Store] = [store] if store is not None else []

    def get_reader() -> StoreReader:  # the store is opened when a side is stored, not before
        if not opened:
            opened.append(stack.enter_context(_store(settings, None, readonly=True)))
        return opened[0].reader

    return get_reader


def _read_inputs(a: str, b: str, settings: Settings, notes: list[str], strict: bool,
                 reader: Callable[[], StoreReader], base_ref: str | None,
                 history_ref: str | None = None) -> tuple[ComparisonInputs, Settings]:
    """Everything the comparison of ``a`` and ``b`` needs, read (the store through ``reader()``, when a side is
    stored), and the settings of the workload they are of."""
    from kbase.comparison.inputs import ComparisonInputs
    from kbase.comparison.reads import read_history

    if history_ref:  # asked for by name: a revision that is not there is the caller's error, not a note
        from kbase.errors import UnknownRevisionError
        from kbase.gitrepo import open_repo, resolve_commit

        try:
            resolve_commit(open_repo(settings.repo), history_ref)
        except UnknownRevisionError as exc:
            raise InputError(exc.message, field="history_ref", value=history_ref) from None

    if _reads_store(a, b):  # a stored side: of the workload the command means (``workload_for``)
        settings = with_workload(settings, reader(), _workload_of_ids(a, b, settings, reader))
    first = _read_side(a, settings, reader, strict)
    second = _read_side(b, settings, reader, strict)
    for text, side in ((a, first), (b, second)):
        if text.startswith("@") and side.baseline_ids and side.meta.workload is not None:
            check_baseline_workload(text, side.meta.workload, settings)
    _check_distinct(a, b, first, second)
    line_ref = history_ref or base_ref or settings.policy.history_ref or None  # the base branch's line
    history = read_history(reader(), settings.policy, settings.repo, first, second, line_ref) if first.baselines \
        else None
    return ComparisonInputs(before=first, after=second, history=history, notes=tuple(notes)), settings


def _workload_of_ids(a: str, b: str, settings: Settings, reader: Callable[[], StoreReader]) -> str | None:
    """Where no workload is named and each side is an ``@ID`` or a profile: the first ``@ID``'s workload (the
    baselines say which; a second of another workload is then incomparable). None otherwise."""
    from kbase.comparison.resolve import RefKind, parse_ref

    if settings.workload_given:
        return None
    try:
        refs = [parse_ref(x) for x in (a, b)]
    except InputError:
        return None
    ids = [r.baseline_id for r in refs if r.kind == RefKind.BASELINE and r.baseline_id is not None]
    if not ids or any(r.kind == RefKind.REVISION for r in refs):
        return None
    found = reader().get_baseline(ids[0])
    return found.workload if found is not None else None


def _reads_store(a: str, b: str) -> bool:
    """Whether a side may be stored (not both profiles): only then is the workload the store's to choose. A
    malformed reference counts as stored: resolving it reports the error, in its usual order."""
    try:
        return not all(_is_profile(x) for x in (a, b))
    except InputError:
        return True


def _check_distinct(a: str, b: str, first: SideInputs, second: SideInputs) -> None:
    """Both sides resolving to the same stored baseline (say a revision without a baseline falling back to
    its nearest ancestor) would compare a capture with itself: refused whatever the options."""
    from kbase.errors import IncomparableError

    shared = sorted(set(first.baseline_ids))
    if shared and set(first.baseline_ids) == set(second.baseline_ids):
        ids = ", ".join(f"@{i}" for i in shared)
        why = "; ".join(first.notes + second.notes)
        raise IncomparableError(f"{a} and {b} resolve to the same baseline {ids}: nothing to compare"
                                + (f" ({why})" if why else ""))


def gate(before: str | None = None, after: str | None = None, settings: Settings | None = None, *,
         base_ref: str | None = None, strict: bool = False, allow_incomparable: bool = False,
         warn_only: bool = False, today: date | None = None, history_ref: str | None = None,
         store: Store | None = None) -> GateResult:
    """compare (default ``HEAD~1`` vs ``HEAD``) -> decide, with the acceptances of the compared range: everything
    read first (both sides, the history, the acceptances), then judged (``comparison.compare.gate``)."""
    from kbase.comparison.compare import gate as judge
    from kbase.comparison.inputs import GateInputs
    from kbase.comparison.reads import read_acceptances

    settings = settings or Settings.load()
    a, b, notes = _pair(before, after, settings, base_ref, default_before="HEAD~1")
    with contextlib.ExitStack() as stack:
        reader = _opener(settings, store, stack)
        if not all(_is_profile(x) for x in (a, b)):
            reader()  # opened first: a missing store is said before any revision is resolved
        compared, chosen = _read_inputs(a, b, settings, notes, strict, reader, base_ref, history_ref)
        accepted = read_acceptances(reader(), chosen.repo, compared.after.meta.workload, compared.before.commit,
                                    compared.after.commit, today) if compared.after.commit else ()
        inputs = GateInputs(compared, accepted)
    return judge(inputs, settings.comparison_policy(), allow_incomparable=allow_incomparable, warn_only=warn_only)


def _decide(comparison: Comparison, accepted: list[AcceptanceRecord], allow_incomparable: bool,
            warn_only: bool) -> GateResult:
    from kbase.comparison.compare import judged

    return judged(comparison, tuple(accepted), allow_incomparable=allow_incomparable, warn_only=warn_only)


def _is_profile(text: str) -> bool:
    from kbase.comparison.resolve import RefKind, parse_ref

    return parse_ref(text).kind == RefKind.PROFILE


# ------------------------------------------------------------------------------------------ acceptances


def kernel_pattern(text: str, settings: Settings | None = None, *, store: Store | None = None) -> str:
    """A glob or ``/regex/`` as given; a plain name or ``#id`` is looked up (``find_kernel``) and
    becomes the exact pattern of the one stored kernel it names (``lookup.exact_pattern``)."""
    from kbase.analysis.lookup import exact_pattern, is_pattern

    if is_pattern(text):
        return text
    from kbase.api.kernels import find_kernel

    settings = settings or Settings.load()
    with _store(settings, store, readonly=True) as st:
        workload = workload_for(settings, st.reader)
        return exact_pattern(find_kernel(text, settings, workload=workload, store=st)[0])


def accept(pattern: str, *, rev: str, reason: str, expires: date | None = None, settings: Settings | None = None,
           store: Store | None = None) -> AcceptanceRecord:
    """Acknowledge a known regression: the gate lists matching regressions in ``(before, after]`` ranges
    containing ``rev`` as accepted, not failing, until ``expires``. ``pattern``: a glob, ``/regex/``, or
    a kernel name / ``#id`` (``kernel_pattern``)."""
    from kbase.gitrepo import author, open_repo, resolve_commit
    from kbase.policy import check_pattern
    from kbase.store.schema.models import Acceptance
    from kbase.store.write.queries import add_acceptance

    settings = settings or Settings.load()
    check_pattern(pattern, "pattern")
    if not reason.strip():
        raise InputError("must not be empty", field="reason", value=reason)
    commit = resolve_commit(open_repo(settings.repo), rev).hexsha
    with _store(settings, store) as st:
        settings = with_workload(settings, st.reader)
        pattern = kernel_pattern(pattern, settings, store=st)
    row = Acceptance(workload=settings.workload, pattern=pattern, commit=commit, reason=reason,
                     author=author(settings.repo), expires=expires)
    with _store(settings, store) as st:
        return add_acceptance(st.engine, row, st.url)


def acceptances(settings: Settings | None = None, *, all_workloads: bool = False, active_on: date | None = None,
                store: Store | None = None) -> list[AcceptanceRecord]:
    """Stored acceptances of the settings' workload (or all), optionally only those active on a date."""
    from kbase.store.schema.errors import NoStoreError

    settings = settings or Settings.load()
    with contextlib.suppress(NoStoreError), _store(settings, store, readonly=True) as st:
        return st.reader.list_acceptances(None if all_workloads else settings.workload, active_on)
    return []


def revoke(acceptance_id: int, settings: Settings | None = None, *,
           store: Store | None = None) -> AcceptanceRecord:
    """Remove one acceptance: the gate fails on its regressions again."""
    from kbase.store.write.queries import delete_acceptance

    settings = settings or Settings.load()
    with _store(settings, store) as st:
        return delete_acceptance(st, acceptance_id)


