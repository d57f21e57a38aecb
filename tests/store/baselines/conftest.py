"""The baseline store's command tests (this folder): every test gets a fresh store (``store_url``, SQLite or a
new PostgreSQL database), a fresh git repository with two commits (``git_repo``), and shares two small generated
exports (``exports``) and the ``kbase top`` JSON of the first (``top_a``), made once per session (per xdist
worker); a snapshot in this process parses each export once (``_parse_once``; ``real_reads`` opts out)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase
from helpers.store_cases import (
    BACKENDS,
    C1_DATE,
    C2_DATE,
    SPEC,
    git,
)


@pytest.fixture(scope="session")
def exports(tmp_path_factory) -> dict[str, Path]:
    """a: seed 0; b: seed 1 (same kernels, other timings); c: seed 2 with two renamed kernels
    (names the store has not seen)."""
    d = tmp_path_factory.mktemp("exports")
    a = generate_export(d / "a.sqlite", ExportSpec(**SPEC, seed=0))
    generate_export(d / "b.sqlite", ExportSpec(**SPEC, seed=1))
    first_two = list(dict.fromkeys(k.name for k in ExportSpec().kernels))[:2]
    generate_export(d / "c.sqlite",
                    ExportSpec(**SPEC, seed=2,
                               rename={n: f"renamed_{i}_kernel(float*)" for i, n in enumerate(first_two)}))
    assert len(a.names) > 5
    return {k: d / f"{k}.sqlite" for k in "abc"}


@pytest.fixture(scope="session")
def top_a(exports) -> dict:
    """``kbase top a.sqlite --format json --limit 0`` (the default window)."""
    res = run_kbase("top", exports["a"], "--format", "json", "--limit", "0")
    assert res.rc == 0, res
    return json.loads(res.stdout)


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("KBASE_DB", "KBASE_DEBUG"):
        monkeypatch.delenv(var, raising=False)


_PARSED: dict[tuple, object] = {}


@pytest.fixture
def real_reads():
    """Ask for this to parse every export afresh (see ``_parse_once``)."""


@pytest.fixture(autouse=True)
def _parse_once(request, monkeypatch):
    """Parse each export once per worker: snapshots in this process reuse the parsed profile (the
    readers have their own tests; the round-trip tests and every child process read for real)."""
    if "real_reads" in request.fixturenames:
        return
    import dataclasses

    import kbase.readers

    real = kbase.readers.read_profile

    def read_profile(path, progress=None, fmt=None, **options):
        p = Path(path)
        st = p.stat()
        key = (str(p.resolve()), st.st_mtime_ns, st.st_size, tuple(sorted(options.items())))
        if p.is_dir() or progress is not None:
            return real(path, progress, fmt, **options)
        if key not in _PARSED:
            _PARSED[key] = real(p, None, fmt, **options)
        return dataclasses.replace(_PARSED[key], source=p)

    monkeypatch.setattr(kbase.readers, "read_profile", read_profile)


@pytest.fixture(params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def store_url(backend, request, tmp_path) -> str:
    """A fresh, empty store: an SQLite file in tmp_path or a new PostgreSQL database."""
    if backend == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'kbase.db'}"
    return request.getfixturevalue("pg_db_url")


@pytest.fixture
def git_repo(tmp_path) -> Path:
    """A repository on branch ``main`` with two commits (dates C1_DATE, C2_DATE)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "Kbase Test")
    git(repo, "config", "user.email", "test@example.com")
    git(repo, "config", "commit.gpgsign", "false")
    (repo / "src").mkdir()
    (repo / "src" / "model.py").write_text("LAYERS = 1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "first", date=C1_DATE)
    (repo / "src" / "model.py").write_text("LAYERS = 2\n")
    git(repo, "commit", "-q", "-am", "second", date=C2_DATE)
    return repo
