"""The store's schema as names only: where the migrations are, their head revision, and the table names.
Kept free of SQLAlchemy and Alembic so the read connection (``connect``), the foreign-database
guard and a store already at head can use them without importing the store stack (~0.4 s); tests keep
them equal to Alembic's own head and ``SQLModel.metadata``."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from kbase.errors import StoreError

# kbase's own tables at the head revision (``kbase.store.schema.models``) and Alembic's version table.
OWN_TABLES = frozenset({"baseline", "kernel_name", "baseline_kernels", "workload_kernel", "acceptance",
                        "alembic_version", "op_name"})
# ... and those of earlier revisions, which a store still to be migrated holds (0008's row per kernel)
EARLIER_TABLES = frozenset({"baseline_kernel"})

# PostgreSQL's advisory lock that serialises creating and migrating a store (``engine._schema_lock``, ``create``)
SCHEMA_LOCK = 7164812

# Upgrades through these revisions free most of a SQLite store's pages: ``engine.upgrade`` VACUUMs after them.
RECLAIM_REVISIONS = ("0009", "0014")  # 0014 rebuilds baseline_kernels: the old table's pages go free

# Tables SQLite itself may add to any database (AUTOINCREMENT bookkeeping, ANALYZE statistics).
SQLITE_INTERNAL_TABLES = frozenset({"sqlite_sequence", "sqlite_stat1"})

_PACKAGE = Path(__file__).resolve().parents[2]  # the kbase package


def migrations_dir() -> Path:
    """The Alembic scripts: the top-level ``migrations/`` of a source checkout (or an editable install),
    which a built wheel carries inside the package as ``kbase/migrations``."""
    for candidate in (_PACKAGE / "migrations", _PACKAGE.parent / "migrations"):
        if (candidate / "env.py").is_file() and (candidate / "versions").is_dir():
            return candidate
    raise StoreError("kbase installation is missing its migrations directory")


_REVISION = re.compile(r"""^revision\s*(?::[^=]*)?=\s*["']([^"']+)["']""", re.M)
_DOWN = re.compile(r"""^down_revision\s*(?::[^=]*)?=\s*(.*)$""", re.M)


@lru_cache(maxsize=1)
def head_revision() -> str:
    """The newest revision of the migration scripts, read from their ``revision`` / ``down_revision``
    lines (the one revision no other script revises): a store already at it is opened without importing
    Alembic (~0.3 s of every command); an older one is upgraded first (``engine.upgrade_to_read``). One linear
    history is assumed; tests hold this equal to Alembic's ``ScriptDirectory.get_current_head()``."""
    revisions: set[str] = set()
    revised: set[str] = set()
    for script in (migrations_dir() / "versions").glob("*.py"):
        text = script.read_text(encoding="utf-8")
        found = _REVISION.search(text)
        if found is None:
            continue
        revisions.add(found.group(1))
        down = _DOWN.search(text)
        if down is not None:
            revised.update(re.findall(r"""["']([^"']+)["']""", down.group(1)))
    heads = revisions - revised
    if len(heads) != 1:
        raise StoreError(f"kbase's migrations have {len(heads)} heads ({', '.join(sorted(heads)) or 'none'}): "
                         "the installation is damaged")
    return heads.pop()


def name_hash(text: str) -> str:
    """The key of a kernel name in ``kernel_name.name_hash`` (and ``family_hash``): sha1 of the full text."""
    import hashlib

    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
