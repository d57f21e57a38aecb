"""Stage 4 — the baseline store: SQLModel tables (``models``), Alembic migrations (the top-level
``migrations/``, ``schema_names.migrations_dir``), opening and guarding a database (``engine``), the
leaderboard <-> store codec (``codec``) over each baseline's kernel table as packed-column blobs
(``kernel_blobs``, ``sample_blobs``, ``packed``: docs/store-format.md), every read as one SQLAlchemy
statement (``statements``; ``blob_reads`` shapes the blobs) asked through one reader
(``reader.StoreReader``: SQLAlchemy, or ``fast_read`` on the same statements' compiled SQLite or
PostgreSQL text), and the writes (``queries``).

Python: ``kbase.api`` is the front door (``kbase.snapshot``, ``kbase.baselines``, ``kbase.history``);
this package is the layer under it::

    from kbase.store import open_store, queries
    from kbase.store.reader import EngineReader
    with open_store(settings) as store:
        rows = EngineReader(store.engine).list_baselines(workload="train-8gpu")
        lb = queries.load_leaderboard(store.engine, rows[0].id)
"""

from kbase.store.engine import Store, open_store

__all__ = ["Store", "open_store"]
