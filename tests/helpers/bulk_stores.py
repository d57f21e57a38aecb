"""A small SQLite store of synthetic history (``synth.history.write_bulk_history``) for tests that run commands
against one: its URL and the first kernel name it holds."""

from __future__ import annotations

from pathlib import Path


def bulk_store(root: Path, *workloads: tuple[str, int, int, int]) -> tuple[str, str]:
    """(URL, first stored kernel name) of ``root/kb.db`` holding each (workload, baselines, kernels,
    iterations) of ``workloads``, in that order."""
    from sqlalchemy import text

    from kbase.store import open_store
    from kbase.synth.history import write_bulk_history

    url = f"sqlite:///{root / 'kb.db'}"
    store = open_store(url)
    try:
        for workload, n, kernels, iterations in workloads:
            write_bulk_history(store.engine, n, workload=workload, n_kernels=kernels, iterations=iterations)
        with store.engine.connect() as conn:
            name = conn.execute(text("SELECT name FROM kernel_name ORDER BY id LIMIT 1")).scalar_one()
    finally:
        store.close()
    return url, name
