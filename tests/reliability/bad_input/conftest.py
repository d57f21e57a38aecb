"""The bad-input matrix's world (this folder): a repository with commits and a store that already holds a baseline,
on SQLite and (where a server can run) PostgreSQL."""

from __future__ import annotations

import gc

import pytest

from helpers import pg
from helpers.bad_input import (
    World,
    seed_store,
)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("reliability"))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("KBASE_DB", "KBASE_DEBUG", "KBASE_BUSY_TIMEOUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture(scope="module")
def sqlite_store(world) -> str:
    url = f"sqlite:///{world.root / 'store' / 'kbase.db'}"
    return seed_store(world, url)


@pytest.fixture(scope="module")
def pg_store(world, pg_url) -> str:
    url = pg.create_database(pg_url, prefix="rel_")
    try:
        yield seed_store(world, url)
    finally:
        gc.collect()
        pg.drop_database(pg_url, url)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request) -> str:
    return request.getfixturevalue("sqlite_store" if request.param == "sqlite" else "pg_store")
