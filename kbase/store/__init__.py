"""Stage 4 — the baseline store: SQLModel tables (``models``), Alembic migrations (``migrations/``),
opening and guarding a database (``engine``), the leaderboard <-> rows codec (``codec``) and the
queries (``queries``).

Python: ``kbase.api`` is the front door (``kbase.snapshot``, ``kbase.baselines``, ``kbase.history``);
this package is the layer under it::

    from kbase.store import open_store, queries
    with open_store(settings) as store:
        rows = queries.list_baselines(store.engine, workload="train-8gpu")
        lb = queries.load_leaderboard(store.engine, rows[0].id)
"""

from kbase.store.engine import Store, open_store

__all__ = ["Store", "open_store"]
