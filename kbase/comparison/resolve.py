"""What to compare: the one reference resolver for every command.

- ``@ID``: that stored baseline.
- an existing file or directory (where a command accepts profiles): a profile, whose leaderboard is
  computed on the fly (nothing stored) by the caller (``kbase.api``).
- anything else: a git revision. Its baselines (repeat captures pooled, the same capture never
  twice) are used; when it has none, first-parent ancestry is walked (at most ``ANCESTRY_LIMIT``
  commits) to the nearest commit that has one, and the note says which commit and how many were
  skipped (``strict`` makes it an error).

This module reads (git and the store): ``read_stored`` gives a side's captures as ``inputs.SideInputs``, which
``compare.pool`` pools; ``resolve_stored`` does both, for a caller that wants one side alone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.comparison.inputs import Resolved, SideInputs
from kbase.errors import InputError, NoBaselineError

if TYPE_CHECKING:
    from kbase.comparison.side import SideMeta
    from kbase.store.read.reader import StoreReader
    from kbase.store.schema.records import BaselineRecord


class RefKind(StrEnum):
    BASELINE = "baseline"
    PROFILE = "profile"
    REVISION = "revision"


@dataclass(frozen=True)
class Ref:
    text: str
    kind: RefKind
    baseline_id: int | None = None
    path: Path | None = None


# The largest id a baseline can have (SQLite's and PostgreSQL's 64-bit integer keys).
MAX_BASELINE_ID = 2**63 - 1


def parse_ref(text: str, *, profiles: bool = True) -> Ref:
    """``@12`` a baseline, an existing file a profile (when ``profiles``), else a git revision. A folder is
    read as a (per-rank trace) profile only when written as a path (``./main``, ``runs/a``): a bare word
    is a revision even if a folder of that name exists, so a directory named like a branch never shadows it.
    git's own revisions that start with ``@`` (``@``, ``@{1}``, ``@{upstream}``, ``@~2``, ``@^``) are revisions."""
    if text.startswith("@"):
        token = text[1:]
        if token.isascii() and token.isdigit():
            if len(token.lstrip("0")) > 19 or int(token) > MAX_BASELINE_ID:  # (no int() of 5,000 digits)
                raise InputError(f"no such baseline in the store (ids go up to {MAX_BASELINE_ID})", field="ref",
                                 value=text)
            return Ref(text, RefKind.BASELINE, baseline_id=int(token))
        if token and token[0] not in "{~^":
            raise InputError("a baseline id looks like @12", field="ref", value=text)
        return Ref(text, RefKind.REVISION)
    if profiles and text and _exists(text) and (not Path(text).is_dir() or _written_as_path(text)):
        return Ref(text, RefKind.PROFILE, path=Path(text))
    if not text.strip():
        raise InputError("empty revision", field="ref", value=text)
    return Ref(text, RefKind.REVISION)


def _exists(text: str) -> bool:
    """Whether a file or folder of this name exists (a name too long or with a NUL for the file system
    names none: it is then read as a revision, and git says what is wrong with it)."""
    try:
        return Path(text).exists()
    except (OSError, ValueError):
        return False


def _written_as_path(text: str) -> bool:
    return "/" in text or text.startswith(".") or text.startswith("~")


def side_meta(bs: Sequence[BaselineRecord]) -> SideMeta:
    from kbase.comparison.side import SideMeta

    b = bs[-1]
    return SideMeta(workload=b.workload, gpu_models=b.gpu_models, gpu_count=b.gpu_count, window_spec=b.window_spec,
                    commit=b.commit, baselines=tuple(x.id for x in bs if x.id is not None))


def distinct_captures(bs: Sequence[BaselineRecord]) -> list[BaselineRecord]:
    """One baseline per capture: the same file (sha256) with the same window stored twice (``--force``)
    is one sample, not two. The newest copy is kept."""
    seen: dict[tuple[str, str], BaselineRecord] = {}
    for b in bs:
        seen[(b.source_sha256, b.window_spec)] = b
    return sorted(seen.values(), key=lambda b: b.id or 0)


def _from_baselines(reader: StoreReader, bs: Sequence[BaselineRecord], label: str,
                    notes: list[str]) -> SideInputs:
    """The captures of ``bs`` to pool: the newest's GPU/window fingerprint only, each capture once."""
    from kbase.store.read.reader import load_capture

    newest = bs[-1]
    same = [b for b in bs if b.fingerprint == newest.fingerprint]
    if len(same) < len(bs):
        notes.append(f"{label}: {len(bs) - len(same)} baseline(s) at this commit have another GPU/window fingerprint "
                     "and were not pooled")
    unique = distinct_captures(same)
    if len(unique) < len(same):
        notes.append(f"{label}: {len(same) - len(unique)} re-stored copy(ies) of the same capture not pooled twice")
    if len(unique) > 1:
        notes.append(f"{label}: pooled {len(unique)} repeat captures ({', '.join(f'@{b.id}' for b in unique)})")
    stored = tuple(b for b in unique if b.id is not None)
    return SideInputs(label=label, captures=tuple(load_capture(reader, b) for b in stored), meta=side_meta(unique),
                      commit=newest.commit, baselines=stored, notes=tuple(notes))


FULL_HASH = re.compile(r"[0-9a-f]{40}")


def _line_of(text: str, repo: Path | None) -> tuple[str, list[str], InputError | None]:
    """(commit, its first-parent line, itself first; git's error when git does not know it) of a revision.
    A full commit hash that git cannot read here (no repository, a commit made in another clone: a CI
    artifact's store, ``kbase report`` of its history) is taken as it is, with no ancestry: its own
    baselines, or git's own error when the store holds none either."""
    from kbase.gitrepo import ANCESTRY_LIMIT, first_parents, open_repo, resolve_commit

    try:
        repo_obj = open_repo(repo)
        commit = resolve_commit(repo_obj, text).hexsha
    except InputError as exc:
        if not FULL_HASH.fullmatch(text.lower()):
            raise
        return text.lower(), [text.lower()], exc
    return commit, first_parents(repo_obj, commit, ANCESTRY_LIMIT), None


def resolve_stored(ref: Ref, reader: StoreReader, *, workload: str, repo: Path | None = None,
                   strict: bool = False) -> Resolved:
    """One side of a diff from the store, pooled: ``read_stored``, then ``compare.pool``."""
    from kbase.comparison.compare import pool

    return pool(read_stored(ref, reader, workload=workload, repo=repo, strict=strict))


def read_stored(ref: Ref, reader: StoreReader, *, workload: str, repo: Path | None = None,
                strict: bool = False) -> SideInputs:
    """One side of a diff from the store, read: a baseline id, or a git revision's baselines (the nearest
    first-parent ancestor's when it has none, unless ``strict``)."""
    if ref.kind == RefKind.BASELINE:
        assert ref.baseline_id is not None
        b = reader.baseline(ref.baseline_id)
        return _from_baselines(reader, [b], f"@{b.id} ({b.commit[:12]})", [])
    commit, chain, unknown = _line_of(ref.text, repo)
    found = reader.baselines_at(workload, chain)
    for skipped, c in enumerate(chain):
        if c in found:
            notes = []
            if skipped:
                if strict:
                    raise NoBaselineError(f"no baseline of workload {workload!r} at {ref.text} ({commit[:12]}); "
                                          f"strict mode forbids walking back (nearest: {c[:12]}, "
                                          f"{skipped} commit(s) back)", field="strict", value=True)
                notes.append(f"{ref.text}: no baseline at {commit[:12]}; using {c[:12]} ({skipped} commit(s) back on "
                             "first-parent history)")
            return _from_baselines(reader, found[c], f"{ref.text} ({c[:12]})", notes)
    if unknown is not None:  # neither git nor the store knows it: most likely a mistyped hash
        raise unknown
    raise NoBaselineError(f"no baseline of workload {workload!r} at {ref.text} ({commit[:12]}) or its "
                     f"{len(chain) - 1} first-parent ancestor(s); run kbase snapshot there first")


def resolve_baseline(ref: Ref, reader: StoreReader, *, workload: str,
                     repo: Path | None = None) -> BaselineRecord:
    """A single stored baseline: ``@ID``, or the newest baseline of ``workload`` at a git revision."""
    if ref.kind == RefKind.BASELINE:
        assert ref.baseline_id is not None
        return reader.baseline(ref.baseline_id)
    from kbase.gitrepo import open_repo, resolve_commit

    try:
        commit = resolve_commit(open_repo(repo), ref.text).hexsha
    except InputError:
        if ref.text.isascii() and ref.text.isdigit() and len(ref.text) <= 18:  # "12": say how to name baseline 12
            raise InputError(f"not a git revision; for baseline {ref.text} write @{ref.text}", field="ref",
                             value=ref.text) from None
        raise
    found = reader.baselines_at(workload, [commit]).get(commit)
    if not found:
        raise NoBaselineError(f"no baseline of workload {workload!r} at {ref.text} ({commit[:12]})")
    return found[-1]
