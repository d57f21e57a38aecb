"""Front door, baselines as files: ``export_baselines`` writes a folder (a git data branch's, say) with one file
per baseline, deletion and acceptance; ``import_baselines`` merges such a folder into the store. The format is
docs/export-format.md's (``store.export_files``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.errors import InputError
from kbase.settings import Settings
from kbase.store.transfer.transfer import ExportResult, ImportResult

if TYPE_CHECKING:
    from kbase.store.engine import Store
    from kbase.store.transfer.export_folder import Folder

from kbase.api.common import _store


def export_baselines(folder: Path | str, settings: Settings | None = None, *, workload: str | None = None,
                     store: Store | None = None) -> ExportResult:
    """Write every stored baseline (of ``workload``, else all) and acceptance that ``folder`` lacks, one file
    each, named by the hash of its bytes (created if missing; nothing in it is rewritten or followed through
    a link). A baseline whose capture key the folder holds with other content is refused (exit 2, naming
    both) before anything is written."""
    from kbase.safe_write import OutputDir
    from kbase.store.schema.errors import NoStoreError
    from kbase.store.transfer.transfer import export

    settings = settings or Settings.load()
    path = Path(folder)
    if not os.path.lexists(path) and not path.parent.is_dir():
        raise InputError(f"cannot be created: folder {path.parent} does not exist", field="export_dir",
                         value=str(path))
    result = ExportResult(path)
    with OutputDir(path, "export_dir") as d:
        with contextlib.suppress(NoStoreError), _store(settings, store, readonly=True) as st:
            result = export(st, d, workload)
    return result


def import_baselines(folder: Path | str, settings: Settings | None = None, *, keep_branches: list[str] | None = None,
                     store: Store | None = None) -> ImportResult:
    """Merge an export folder into the store: each baseline once (the same capture key and content again is
    "already stored"), tombstones applied (the deleted baselines leave the store and are not imported),
    acceptances added. Every file is checked before the store is opened: a bad file, or one capture key with
    two contents (two files, or a file and the store), is one line naming it/them, exit 2, the store unchanged.

    A tombstone obeys prune's keep rules (``keep_rules``) for ``keep_branches`` (default: the repository's
    default branch): one that would delete a baseline in a kept branch's history, stored on a kept branch or
    needed by an acceptance is not applied, and listed (``ImportResult.refused_tombstones``); so is every
    tombstone when the rules cannot be checked (no repository, a shallow clone)."""
    from kbase.safe_write import OutputDir
    from kbase.store.transfer.export_folder import read_folder
    from kbase.store.transfer.transfer import import_folder

    settings = settings or Settings.load()
    path = Path(folder)
    if not path.is_dir() or path.is_symlink():
        raise InputError("is not a folder" if path.exists() or path.is_symlink() else "no such folder",
                         field="import_dir", value=str(path))
    with OutputDir(path, "import_dir", create=False) as d:
        checked = read_folder(d, limit=settings.import_max_mb << 20)
    with _store(settings, store) as st:  # opened (or created) only once every file checked out
        kept_by = _kept_by(settings, keep_branches, st, checked) if checked.tombstones else _nothing_kept
        return import_folder(st, checked, kept_by)


def _nothing_kept(workload: str, commit: str, branch: str) -> str | None:
    return None


def _kept_by(settings: Settings, keep_branches: list[str] | None, st: Store, folder: Folder
             ) -> Callable[[str, str, str], str | None]:
    """Prune's keep rules for an import's tombstones: a kept branch's history, a baseline stored on a kept
    branch, what the acceptances (stored and imported) need. Rules that cannot be had keep everything."""
    from kbase.api.keep_rules import Accepted, default_branches, keep_rules
    from kbase.errors import KbaseError
    from kbase.gitrepo import open_repo

    try:
        repo = open_repo(settings.repo)
        branches = keep_branches or default_branches(repo)
        if not branches:
            raise InputError("no default branch (origin/HEAD, main or master) to keep; name one with --keep-branch")
        rules = keep_rules(repo, branches)
    except KbaseError as exc:
        if keep_branches:  # named on purpose: a wrong name is the user's to fix
            raise
        why = f"prune's keep rules could not be checked ({exc})"
        return lambda workload, commit, branch: why
    reader = st.reader
    stored = [(b.workload, b.commit) for b in reader.list_baselines()]
    stored += [(f.row["workload"], f.row["commit"]) for f in folder.baselines.values()]
    accepted = [Accepted(a.workload, a.commit, f"acceptance #{a.id}") for a in reader.list_acceptances()]
    accepted += [Accepted(a["workload"], a["commit"], f"an imported acceptance of {a['pattern']!r}")
                 for a in folder.acceptances.values()]
    rules.need(accepted, stored, repo)
    return rules.why_kept
