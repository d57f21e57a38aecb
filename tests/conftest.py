"""The tests' fixtures; the helpers they share live in ``tests/helpers/`` (``helpers.shared``: the repository
and the real data, ``helpers.cli``: running ``kbase``, ``helpers.tiny_export``, ``helpers.pg`` and the rest).

- ``shared_data``: the real profiler data folder (skips where absent); ``tiny_export``: a small nsys export;
- ``pg_url`` / ``pg_db_url``: a throwaway PostgreSQL server for the session / a fresh database per test;
  ``store_url``: a fresh store on each backend.
- the top cache (``store.top_cache``) is off in every test (``KBASE_CACHE_MAX_MB=0``), so a ``kbase top`` that a
  test means to read the file does read it; ``tests/store/top_cache/`` turns it on where it is the subject.

Every PostgreSQL case is marked ``slow`` (a server per worker, then the same code path as SQLite's above the
engine): the quick run ``-m "not slow"`` tests the SQLite store, the full suite both.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from helpers import pg
from helpers.shared import require_shared
from helpers.tiny_export import make_tiny_export


@pytest.fixture(autouse=True)
def _no_top_cache(monkeypatch) -> None:
    monkeypatch.setenv("KBASE_CACHE_MAX_MB", "0")


@pytest.hookimpl(tryfirst=True)  # (before the -m selection)
def pytest_collection_modifyitems(items) -> None:
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if {"pg_url", "pg_db_url"} & set(item.fixturenames) or "postgresql" in map(str, params.values()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def shared_data() -> Path:
    return require_shared()


@pytest.fixture
def tiny_export(tmp_path: Path) -> Path:
    return make_tiny_export(tmp_path / "tiny.sqlite")


@pytest.fixture(scope="session")
def pg_url():
    """URL (``postgresql+psycopg2://``) of a PostgreSQL database for the session.

    ``KBASE_TEST_PG_URL`` when set; else a throwaway PostgreSQL 15 server started here (as the
    ``postgres`` user when running as root), stopped and removed at the end of the session. Skips
    where no server binaries exist. With pytest-xdist each worker starts its own server."""
    env = os.environ.get("KBASE_TEST_PG_URL")
    if env:
        url = "postgresql+psycopg2://" + env.split("://", 1)[1]
        try:
            pg.wait_ready(url)
        except pg.PgUnavailable as exc:
            pytest.fail(f"KBASE_TEST_PG_URL is set but unusable: {exc}")
        yield url
        return
    if pg.find_bindir() is None:
        pytest.skip(pg.SKIP_REASON)
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        pytest.skip("psycopg2 not installed (pip install 'kbase[postgres]')")
    server = pg.PgServer()
    try:
        url = server.start()
    except pg.PgUnavailable as exc:
        pytest.skip(f"cannot start a throwaway PostgreSQL server: {exc}")
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture
def pg_db_url(pg_url):
    """A fresh, empty PostgreSQL database for one test (dropped afterwards)."""
    url = pg.create_database(pg_url)
    try:
        yield url
    finally:
        pg.drop_database(pg_url, url)


@pytest.fixture(scope="module")
def pg_copy_of(pg_url):
    """``copy(url)``: a new PostgreSQL database holding a copy of the store at ``url`` (``pg.copy_store``),
    dropped after the module: the same store on the other backend."""
    made: list[str] = []

    def copy(src_url: str) -> str:
        made.append(pg.create_database(pg_url))
        pg.copy_store(src_url, made[-1])
        return made[-1]

    yield copy
    for url in made:
        pg.drop_database(pg_url, url)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path) -> str:
    """A fresh, empty store on each backend (files may override this with their own)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("pg_db_url")
