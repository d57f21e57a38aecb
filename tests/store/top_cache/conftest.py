"""The top cache's tests' fixtures: the cache left on, two generated exports (built once per module) and a user's
folder holding a copy of one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export


@pytest.fixture(autouse=True)
def _cache_on(monkeypatch) -> None:
    monkeypatch.delenv("KBASE_CACHE_MAX_MB", raising=False)  # (the suite's conftest turns it off elsewhere)


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("exports")
    return {"a": generate_export(d / "a.sqlite", ExportSpec(n_gpus=2, iterations=5, seed=21)).path,
            "b": generate_export(d / "b.sqlite", ExportSpec(n_gpus=2, iterations=5, seed=22)).path}


@pytest.fixture
def world(tmp_path, exports) -> dict[str, Path]:
    """A user's folder holding a copy of export ``a``, and a store folder elsewhere."""
    user = tmp_path / "user"
    user.mkdir()
    shutil.copyfile(exports["a"], user / "a.sqlite")
    return {"profile": user / "a.sqlite", "user": user, "db": tmp_path / "kb" / "kb.db", "cwd": tmp_path}
