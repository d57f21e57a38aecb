"""The stale-identity tests' fixtures: ``mode`` (each test twice: files hashed whole, and the metadata identity of
large files, by setting ``FULL_HASH_BYTES`` to 0), two generated exports (built once per module) and a world (a git
repository, a store, a user's folder)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.stale_identity import git


@pytest.fixture(params=["whole-file hash", "metadata identity"])
def mode(request, monkeypatch) -> str:
    import kbase.readers.source as source

    if request.param == "metadata identity":
        monkeypatch.setattr(source, "FULL_HASH_BYTES", 0)
        monkeypatch.setattr(source, "RACY_NS", 0)  # the files are made moments before; the racy rule has its test
    return request.param


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("exports")
    return {"a": generate_export(d / "a.sqlite", ExportSpec(n_gpus=1, iterations=4, seed=11)).path,
            "b": generate_export(d / "b.sqlite", ExportSpec(n_gpus=1, iterations=4, seed=12)).path}


@pytest.fixture
def world(tmp_path) -> dict[str, Path]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "commit", "-q", "--allow-empty", "-m", "one")
    user = tmp_path / "user"
    user.mkdir()
    return {"repo": repo, "db": tmp_path / "kb.db", "user": user, "tmp": tmp_path}
