"""Stage 4 — the baseline store, in subpackages that say what they hold:

- ``schema``: the SQLModel tables (``models``; Alembic's migrations are the top-level ``migrations/``), the
  schema as names, the records every read returns, the store's errors and what it refuses to touch;
- ``codec``: the kernel-table format (packed-column blobs, docs/store-format.md) and the leaderboard <-> store
  mapping;
- ``read``: the one connection (sqlite3 or psycopg2), every read as one statement, one reader
  (``read.reader.StoreReader``), the top cache;
- ``write``: the one writer (snapshot, import, the synthetic history) and a new store created from the DDL;
- ``transfer``: export and import (the data branch's files, checked as hostile input).

Beside them: ``engine`` (opening, migrating and guarding a store: ``open_store``, ``Store``), ``identity``
("is this file stored?", one lookup) and ``describe`` (``kbase db current``). Imports run down that list
(``schema`` imports none of the others); tests/test_layers.py finds no module cycle and no sub-package loop.

Python: ``kbase.api`` is the front door (``kbase.snapshot``, ``kbase.baselines``, ``kbase.history``);
this package is the layer under it::

    from kbase.store import open_store
    with open_store(settings, readonly=True) as store:
        rows = store.reader.list_baselines(workload="train-8gpu")
        lb = store.reader.leaderboard(rows[0])
"""

from kbase.store.engine import Store, open_store

__all__ = ["Store", "open_store"]
