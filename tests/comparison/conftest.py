"""Fixtures the gate's test modules share: the gate world's repository and exports, and its stores (a SQLite file and a
PostgreSQL database), each built once per module that uses it."""

from __future__ import annotations

import gc

import pytest

from helpers.diff_exports import Exports, shared_export_dir
from helpers.gate_world import _PG_USED, GATE_RECIPES, World, _git_commit


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    import git

    root = tmp_path_factory.mktemp("gate_repo")
    repo = git.Repo.init(root, initial_branch="main")
    with repo.config_writer() as cw:
        cw.set_value("user", "name", "kbase test")
        cw.set_value("user", "email", "test@kbase.invalid")
    train = root / "train.py"
    commits = {}
    for i in range(5):
        commits[f"c{i}"] = _git_commit(repo, train, f"step = {i}\n", f"commit c{i}")
    repo.git.checkout("-b", "feature", commits["c2"])
    commits["f1"] = _git_commit(repo, train, "step = 'feature'\n", "feature work")
    repo.git.checkout("main")
    assert repo.head.commit.hexsha == commits["c4"]
    exports = Exports(shared_export_dir(tmp_path_factory), GATE_RECIPES)
    return World(repo=root, commits=commits, exports=exports)


@pytest.fixture(scope="module")
def sqlite_url(tmp_path_factory) -> str:
    return f"sqlite:///{tmp_path_factory.mktemp('gate_store') / 'kbase.db'}"


@pytest.fixture(scope="module")
def pg_module_url(request):
    """One PostgreSQL database for the module on the session's server (``pg_url`` of conftest): the
    scenarios are isolated by workload name, so their baselines are snapshotted once, not per test.
    None when conftest has no such server fixture (then each test gets ``pg_db_url``)."""
    try:
        from helpers import pg

        admin = request.getfixturevalue("pg_url")
    except (ImportError, AttributeError, pytest.FixtureLookupError):
        yield None
        return
    url = pg.create_database(admin)
    yield url
    gc.collect()
    pg.drop_database(admin, url)


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, sqlite_url) -> str:
    """The store URL: a module-wide SQLite file, or a PostgreSQL database."""
    if request.param == "sqlite":
        return sqlite_url
    url = request.getfixturevalue("pg_module_url")
    if url is None:
        try:
            url = request.getfixturevalue("pg_db_url")
        except pytest.FixtureLookupError:
            pytest.skip("no pg_db_url fixture in tests/conftest.py: PostgreSQL variant skipped")
    _PG_USED.append(True)
    return url
