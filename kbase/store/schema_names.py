"""The store's schema as names only: the head revision and the table names. Kept free of SQLAlchemy so
the read-only SQLite path (``sqlite_read``) and the foreign-database guard can use them without
importing the store stack (~0.4 s); tests keep both equal to Alembic's head and ``SQLModel.metadata``."""

from __future__ import annotations

# The newest migration in migrations/versions. A store already at this revision is opened without
# importing Alembic (~0.3 s of every command), and only then read through ``sqlite_read``.
HEAD_REVISION = "0008"

# kbase's own tables (``kbase.store.models``) and Alembic's version table.
OWN_TABLES = frozenset({"baseline", "kernel_name", "baseline_kernel", "acceptance", "alembic_version"})

# Tables SQLite itself may add to any database (AUTOINCREMENT bookkeeping, ANALYZE statistics).
SQLITE_INTERNAL_TABLES = frozenset({"sqlite_sequence", "sqlite_stat1"})


def name_hash(text: str) -> str:
    """The key of a kernel name in ``kernel_name.name_hash`` (and ``family_hash``): sha1 of the full text."""
    import hashlib

    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
