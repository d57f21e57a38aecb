"""Stage 4 — the baseline store: SQLModel tables (``models``), Alembic migrations (the top-level
``migrations/``, ``schema_names.migrations_dir``), opening and guarding a database (``engine``), the
leaderboard <-> store codec (``codec``) over each baseline's kernel table as packed-column blobs
(``kernel_blobs``, ``sample_blobs``, ``packed``: docs/store-format.md), every read as one SQLAlchemy
statement (``statements``; ``blob_reads`` shapes the blobs) asked through one reader (``reader.StoreReader``:
the statements' compiled text on one DB-API connection, ``connect``: sqlite3 or psycopg), and the writes
(``queries``, through SQLAlchemy).

Python: ``kbase.api`` is the front door (``kbase.snapshot``, ``kbase.baselines``, ``kbase.history``);
this package is the layer under it::

    from kbase.store import open_store
    with open_store(settings, readonly=True) as store:
        rows = store.reader.list_baselines(workload="train-8gpu")
        lb = store.reader.leaderboard(rows[0])
"""

from kbase.store.engine import Store, open_store

__all__ = ["Store", "open_store"]
