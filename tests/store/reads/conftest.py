"""The stores the read tests read (this folder): one SQLite store filled with every odd value (NULLs, booleans, quoted
names, a baseline without kernels), and a PostgreSQL copy of it (``pg.copy_store``)."""

from __future__ import annotations

import sqlite3
from datetime import date
from pathlib import Path

import pytest

from helpers.kernel_tables import edit_kernels


def _fill(url: str) -> list[str]:
    """Two workloads of bulk baselines, then edits that put every odd value in: NULLs, booleans set,
    tags, a formula-like and quoted kernel name, a baseline without kernels, three acceptances."""
    from kbase.store import open_store
    from kbase.store.schema.models import Acceptance
    from kbase.store.write.queries import add_acceptance
    from kbase.synth.history import write_bulk_history

    with open_store(url) as st:
        write_bulk_history(st.engine, 5, workload="bulk", n_kernels=12, iterations=6)
        write_bulk_history(st.engine, 3, workload="other", n_kernels=8, iterations=4, seed=3)
        for pattern, wl, exp in (("*gemm*", "bulk", None), ("/nccl/", "bulk", date(2020, 1, 2)),
                                 ("x", "other", date(2999, 1, 1))):
            add_acceptance(st.engine, Acceptance(workload=wl, pattern=pattern, commit="c" * 40, reason="known",
                                                 author="a", expires=exp))
    path = url.removeprefix("sqlite:///")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE baseline SET commit_date = NULL, dirty = 1, detached = 1, branch = '', "
                     "tags = '[\"nightly\",\"a,b\"]', step_wall_ns = 1234.5, note = 'n' WHERE id = 2")
        conn.execute("UPDATE baseline SET created_at = '2026-01-05 11:30:00.000000+00:00' WHERE id = 3")
        conn.execute("UPDATE baseline SET aligned = 0 WHERE id = 4")
        conn.execute("UPDATE baseline SET source_probe = 'p' || id, source_mtime_ns = 7 WHERE id IN (5, 6)")
        conn.execute("DELETE FROM baseline_kernels WHERE baseline_id = 7")
    conn.close()

    def nulls(t) -> None:  # NULL levels (no iteration markers) and a fragmented flag on ranks 2 and 5
        for c in ("per_iter_ns", "count_per_iter", "amdahl_ceiling", "share_window"):
            getattr(t, c)[[1, 4]] = float("nan")
        t.fragmented[[1, 4]] = True
        t.iter_ns[2], t.iter_count[2] = 0.0, 0.0  # rank 3: no samples stored

    edit_kernels(path, 2, nulls)
    edit_kernels(path, 4, lambda t: t.share_kernel.fill(float("nan")))
    rank4 = int(edit_kernels(path, 5, lambda t: None).name_id[3])
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE kernel_name SET name = '=cmd|\"x\", y' || char(13) || 'z', short_name = '=cmd' "
                     "WHERE id = ?", (rank4,))
    names = [r[0] for r in conn.execute("SELECT name FROM kernel_name ORDER BY id LIMIT 3")]
    conn.close()
    return names


@pytest.fixture(scope="module")
def sqlite_store(tmp_path_factory) -> tuple[str, list[str], Path]:
    root = tmp_path_factory.mktemp("reads")
    url = f"sqlite:///{root / 'kb.db'}"
    return url, _fill(url), root


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(request, sqlite_store) -> tuple[str, list[str], Path]:
    """The filled store on each backend (PostgreSQL: a copy of the SQLite one)."""
    if request.param == "sqlite":
        return sqlite_store
    url, names, root = sqlite_store
    return request.getfixturevalue("pg_copy_of")(url), names, root


@pytest.fixture(scope="module")
def reader(store):
    from kbase.store import open_store

    with open_store(store[0], readonly=True) as st:
        yield st.reader


@pytest.fixture(scope="module")
def both(sqlite_store, pg_copy_of):
    """The filled store on SQLite and its PostgreSQL copy."""
    url, names, root = sqlite_store
    return url, pg_copy_of(url), names
