"""The repository and the real profiler data in ``../shared/data`` (read-only; absent in a fresh clone, in which
case the tests that need it skip with ``SHARED_SKIP_REASON``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from urllib.parse import quote

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "data"
NSYS_DIR = SHARED / "nsys"
KINETO_DIR = SHARED / "kineto"
SHARED_SKIP_REASON = "../shared/data not present (fresh clone): real-export tests skipped"

# The export that carries every table the tiny export needs (its DDL is copied when present).
SCHEMA_SOURCE = NSYS_DIR / "h100_2gpu_fsdp_t5.sqlite"


# --------------------------------------------------------------------------- shared real data


def shared_present() -> bool:
    return NSYS_DIR.is_dir() and any(NSYS_DIR.glob("*.sqlite"))


def shared_exports() -> list[Path]:
    """Every Nsight Systems export in shared/data/nsys (empty list when absent)."""
    return sorted(NSYS_DIR.glob("*.sqlite")) if NSYS_DIR.is_dir() else []


def require_shared(name: str | None = None) -> Path:
    """The shared data folder, or one export in it; skip the test when it is not there."""
    if not shared_present():
        pytest.skip(SHARED_SKIP_REASON)
    if name is None:
        return SHARED
    path = NSYS_DIR / name
    if not path.is_file():
        pytest.skip(f"{path} not present: real-export test skipped")
    return path


def export_params() -> list:
    """``pytest.mark.parametrize`` values: one per shared export, or a single skipped case."""
    paths = shared_exports()
    if not paths:
        return [pytest.param(None, id="no-shared-data", marks=pytest.mark.skip(reason=SHARED_SKIP_REASON))]
    return [pytest.param(p, id=p.stem) for p in paths]


def ro_connect(path: Path) -> sqlite3.Connection:
    """Read-only, immutable connection: the test never writes next to (or into) a shared file."""
    return sqlite3.connect(f"file:{quote(str(Path(path).resolve()))}?mode=ro&immutable=1", uri=True)
