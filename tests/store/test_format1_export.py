"""An export folder written by kbase before kernel-table format 2 (tests/data/export_format1: how it was made)
imports into today's store with nothing lost: every leaderboard ``show`` gave and every diff (kernels and ops)
are what that kbase said."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers.cli import run_kbase

DATA = Path(__file__).resolve().parents[1] / "data" / "export_format1"
VOLATILE = {"version", "schema", "id", "created_at", "kbase_version", "stored_at"}


def _stable(doc):
    """The answer without what names the kbase or the store that gave it."""
    if isinstance(doc, dict):
        return {k: _stable(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [_stable(v) for v in doc]
    return doc


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("f1")
    folder = tmp / "folder"
    shutil.copytree(DATA / "folder", folder)
    url = f"sqlite:///{tmp / 'k.db'}"
    r = run_kbase("import", folder, "--db", url)
    assert r.rc == 0 and "4 new baseline(s)" in r.stderr, r
    listed = json.loads(run_kbase("list", "--format", "json", "--db", url).stdout)["baselines"]
    return url, {f"{b['workload']}@{b['commit']}": b for b in listed}


def test_every_leaderboard_is_what_the_old_kbase_showed(imported):
    url, by_key = imported
    expected = json.loads((DATA / "expected.json").read_text())["show"]
    assert set(by_key) == set(expected)
    for key, old in expected.items():
        b = by_key[key]
        r = run_kbase("show", f"@{b['id']}", "--name", b["workload"], "--format", "json", "--db", url)
        assert r.rc == 0, r
        new = json.loads(r.stdout)
        assert _stable(new["kernels"]) == _stable(old["kernels"]), key
        assert _stable(new["summary"]) == _stable(old["summary"]), key


def test_every_diff_is_what_the_old_kbase_said(imported):
    url, by_key = imported
    for workload, old in json.loads((DATA / "expected.json").read_text())["diff"].items():
        ids = sorted(b["id"] for b in by_key.values() if b["workload"] == workload)
        r = run_kbase("diff", f"@{ids[0]}", f"@{ids[-1]}", "--name", workload, "--format", "json", "--db", url)
        assert r.rc == 0, r
        new = json.loads(r.stdout)
        for part in ("kernels", "ops", "totals", "counts"):
            assert _stable(new[part]) == _stable(old[part]), (workload, part)
