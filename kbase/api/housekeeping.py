"""Front door, housekeeping: ``prune`` — delete the baselines nobody needs any more (pull-request runs, old
branches), never one that a kept branch's history or an acceptance needs."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.errors import InputError
from kbase.settings import Settings

if TYPE_CHECKING:
    from kbase.api.keep_rules import KeepRules
    from kbase.store.engine import Store
    from kbase.store.schema.records import BaselineRecord

from kbase.api.common import _store

BASELINE_KINDS = ("snapshot", "bisect")  # Baseline.kind: a profiled run of the job, a midpoint kbase bisect probed
_AGE = re.compile(r"^\s*(\d{1,6})\s*([hdw])\s*$")
_UNIT = {"h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}


def parse_age(text: str) -> timedelta:
    """``30d``, ``12h``, ``2w`` as a duration; anything else an ``InputError`` naming ``older_than``."""
    m = _AGE.match(text or "")
    if not m:
        raise InputError("expected an age such as 30d, 12h or 2w", field="older_than", value=text)
    return int(m.group(1)) * _UNIT[m.group(2)]


@dataclass(frozen=True)
class PruneItem:
    """One stored baseline and what prune does with it: ``keep`` and why, or delete and why."""

    baseline: BaselineRecord
    keep: bool
    why: str


@dataclass
class PruneResult:
    """What ``prune`` decided for every baseline it looked at (oldest first), and whether it deleted."""

    items: list[PruneItem]
    keep_branches: dict[str, str]  # branch name -> the tip commit it resolved to
    older_than: timedelta | None
    applied: bool
    tombstones: list[str] = field(default_factory=list)  # file names written into the export folder

    @property
    def deleted(self) -> list[BaselineRecord]:
        return [i.baseline for i in self.items if not i.keep]

    @property
    def kept(self) -> list[PruneItem]:
        return [i for i in self.items if i.keep]

    def __repr__(self) -> str:
        verb = "deleted" if self.applied else "would delete"
        return f"<PruneResult {verb} {len(self.deleted)}, keeps {len(self.kept)} of {len(self.items)}>"


def prune(settings: Settings | None = None, *, keep_branches: list[str], older_than: str | None = None,
          workload: str | None = None, yes: bool = False, export_dir: Path | str | None = None,
          now: datetime | None = None, store: Store | None = None, kind: str | None = None) -> PruneResult:
    """Decide, for every stored baseline (of ``workload``, else all), keep or delete; with ``yes`` delete.

    Kept, always: a baseline whose commit is in the history of a ``keep_branches`` branch (every commit
    reachable from its tip: the local branch, else ``origin/NAME``), or that was stored on such a branch, or
    that an acceptance needs (the baselines at its commit and the nearest stored first-parent ancestor's), or
    that is younger than ``older_than`` (``30d``, ``12h``, ``2w``). Everything else is deleted. A branch name that
    resolves to nothing, or a shallow clone (whose history is cut, so that kept commits would look
    unreachable), is refused before anything is read. ``export_dir``: the export folder these baselines travel
    in (``export``): the deleted baselines' files there are removed and a tombstone written for each, so that
    the deletion travels with it (``import`` applies it). ``kind``: only baselines of this kind (``snapshot``,
    ``bisect``); with ``bisect``, a midpoint ``kbase bisect`` stored is not kept for lying in a kept branch's
    history (it probed that history; the branch's own record is its snapshots), the other rules still hold."""
    import dataclasses

    from kbase.api.keep_rules import keep_rules
    from kbase.gitrepo import open_repo

    settings = settings or Settings.load()
    if not keep_branches:
        raise InputError("name at least one branch whose history is kept (--keep-branch main)",
                         field="keep_branch")
    age = parse_age(older_than) if older_than is not None else None
    if kind is not None and kind not in BASELINE_KINDS:
        raise InputError(f"unknown baseline kind (choose one of {', '.join(BASELINE_KINDS)})", field="kind",
                         value=kind)
    repo = open_repo(settings.repo)
    rules = keep_rules(repo, keep_branches)
    tips = {name: newest_tip(repo, found) for name, found in rules.tips.items()}
    cutoff = _cutoff(now or datetime.now(UTC), age)
    from kbase.store.schema.errors import NoStoreError

    with contextlib.ExitStack() as stack:
        try:  # a dry run only reads (and creates no store)
            st = stack.enter_context(_store(settings, store, readonly=not yes))
        except NoStoreError:
            return PruneResult([], tips, age, applied=yes)
        reader = st.reader
        rows = sorted((b for b in reader.list_baselines(workload=workload) if kind is None or b.kind == kind),
                      key=lambda b: (b.created_at, b.id or 0))
        from kbase.api.keep_rules import Accepted

        rules.need([Accepted(a.workload, a.commit, f"acceptance #{a.id}") for a in reader.list_acceptances()],
                   [(b.workload, b.commit) for b in rows], repo)
        if kind == "bisect":  # a probe of a kept branch's history is not that branch's record
            rules = dataclasses.replace(rules, history=set())
        items = [_decide(b, rules, cutoff, older_than) for b in rows]
        result = PruneResult(items, tips, age, applied=False)
        doomed = [int(i.baseline.id or 0) for i in items if not i.keep]
        if yes and doomed:
            result.tombstones = _delete(st, doomed, export_dir)
        result.applied = yes
    return result


def _cutoff(now: datetime, age: timedelta | None) -> datetime | None:
    """``now - age``; an age reaching past year 1 is the earliest time there is (nothing is older)."""
    if age is None:
        return None
    try:
        return now - age
    except OverflowError:
        return datetime.min.replace(tzinfo=UTC)


def newest_tip(repo, tips: list[str]) -> str:
    """Of a branch's tips (local, remote-tracking), the one the others lead to (else the first)."""
    from kbase.gitrepo import merge_base

    for tip in tips[1:]:
        if merge_base(repo, tips[0], tip) == tips[0]:
            return tip
    return tips[0]


def _decide(b: BaselineRecord, rules: KeepRules, cutoff: datetime | None, older_than: str | None) -> PruneItem:
    why = rules.why_kept(b.workload, b.commit, b.branch)
    if why:
        return PruneItem(b, True, why)
    if cutoff is not None and b.created_at > cutoff:
        return PruneItem(b, True, f"newer than {older_than.strip() if older_than else ''}")
    branch = f"branch {b.branch}" if b.branch else "no branch"
    if b.kind == "bisect":
        return PruneItem(b, False, f"a bisect midpoint, stored {b.created_at:%Y-%m-%d}")
    return PruneItem(b, False, f"not on a kept branch ({branch}), stored {b.created_at:%Y-%m-%d}")


def _delete(st: Store, ids: list[int], export_dir: Path | str | None) -> list[str]:
    """Delete ``ids``; with an export folder, remove their files there and write their tombstones (after the
    store's one transaction: a failure to write leaves the files, which the next import brings back — nothing
    is lost, only not yet pruned)."""
    from kbase.store.write.queries import delete_baselines

    if export_dir is None:
        delete_baselines(st.engine, ids, st.url)
        return []
    from kbase.store.transfer.transfer import tombstone_baselines

    return tombstone_baselines(st, ids, Path(export_dir), lambda: delete_baselines(st.engine, ids, st.url))
