"""Front door, baselines as files: ``export_baselines`` writes a folder (a git data branch's, say) with one file
per baseline, deletion and acceptance; ``import_baselines`` merges such a folder into the store. The format is
docs/export-format.md's (``store.export_files``)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.errors import InputError
from kbase.settings import Settings
from kbase.store.transfer import ExportResult, ImportResult

if TYPE_CHECKING:
    from kbase.store.engine import Store

from kbase.api.common import _store


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
            result = export(st, d, workload)
    return result


def import_baselines(folder: Path | str, settings: Settings | None = None, *,
                     store: Store | None = None) -> ImportResult:
    """Merge an export folder into the store: each baseline once (the same capture key and content again is
    "already stored"), tombstones applied (the deleted baselines leave the store and are not imported),
    acceptances added. Every file is checked before anything is written: a bad file, or one capture key with
    two contents (two files, or a file and the store), is one line naming it/them, exit 2, the store unchanged."""
    from kbase.safe_write import OutputDir
    from kbase.store.export_folder import read_folder
    from kbase.store.transfer import import_folder

    settings = settings or Settings.load()
    path = Path(folder)
    if not path.is_dir() or path.is_symlink():
        raise InputError("is not a folder" if path.exists() or path.is_symlink() else "no such folder",
                         field="import_dir", value=str(path))
    with OutputDir(path, "import_dir", create=False) as d:
        checked = read_folder(d, limit=settings.import_max_mb << 20)
    with _store(settings, store) as st:  # opened (or created) only once every file checked out
        return import_folder(st, checked)
