"""Front door, baselines as files: ``export_baselines`` writes a folder (a git data branch's, say) with one file
per baseline, deletion and acceptance; ``import_baselines`` merges such a folder into the store. The format is
docs/export-format.md's (``store.export_files``)."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.errors import InputError
from kbase.settings import Settings

if TYPE_CHECKING:
    from kbase.store.engine import Store

from kbase.api.common import _store


@dataclass
class ExportResult:
    """What ``export_baselines`` did: baselines and acceptances looked at, files written (their names), files the
    folder held already, baselines left out because the folder holds their tombstone."""

    folder: Path
    baselines: int = 0
    acceptances: int = 0
    written: int = 0
    present: int = 0
    tombstoned: int = 0
    files: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"<ExportResult {self.written} written, {self.present} already in {self.folder}>"


@dataclass
class ImportResult:
    """What ``import_baselines`` did: baselines added (their new ids), already stored, deleted by tombstones,
    left out because of a tombstone, acceptances added."""

    folder: Path
    added: int = 0
    already: int = 0
    deleted: int = 0
    skipped_tombstoned: int = 0
    acceptances_added: int = 0
    added_ids: list[int] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"<ImportResult {self.added} added, {self.already} already stored, {self.deleted} deleted>"


def export_baselines(folder: Path | str, settings: Settings | None = None, *, workload: str | None = None,
                     store: Store | None = None) -> ExportResult:
    """Write every stored baseline (of ``workload``, else all) and acceptance that ``folder`` lacks, one file
    each, named by the hash of its bytes (created if missing; nothing in it is rewritten or followed through
    a link). A baseline whose capture key the folder holds with other content is refused (exit 2, naming
    both) before anything is written."""
    from kbase.safe_write import OutputDir
    from kbase.store.engine import NoStoreError
    from kbase.store.transfer import export

    settings = settings or Settings.load()
    path = Path(folder)
    if not os.path.lexists(path) and not path.parent.is_dir():
        raise InputError(f"cannot be created: folder {path.parent} does not exist", field="export_dir",
                         value=str(path))
    result = ExportResult(path)
    with OutputDir(path, "export_dir") as d:
        with contextlib.suppress(NoStoreError), _store(settings, store, readonly=True) as st:
            done = export(st, d, workload)
            result = ExportResult(path, done.baselines, done.acceptances, done.written, done.present,
                                  done.tombstoned, done.files)
    return result


def import_baselines(folder: Path | str, settings: Settings | None = None, *,
                     store: Store | None = None) -> ImportResult:
    """Merge an export folder into the store: each baseline once (the same capture key and content again is
    "already stored"), tombstones applied (the deleted baselines leave the store and are not imported),
    acceptances added. Every file is checked before anything is written: a bad file, or one capture key with
    two contents (two files, or a file and the store), is one line naming it/them, exit 2, the store unchanged."""
    from kbase.safe_write import OutputDir
    from kbase.store.transfer import import_folder

    settings = settings or Settings.load()
    path = Path(folder)
    if not path.is_dir() or path.is_symlink():
        raise InputError("is not a folder" if path.exists() or path.is_symlink() else "no such folder",
                         field="import_dir", value=str(path))
    with OutputDir(path, "import_dir", create=False) as d, _store(settings, store) as st:
        done = import_folder(st, d)
    return ImportResult(path, done.added, done.already, done.deleted, done.skipped_tombstoned,
                        done.acceptances_added, done.added_ids)
