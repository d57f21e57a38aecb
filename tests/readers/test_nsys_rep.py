"""A .nsys-rep is exported with `nsys export` next to a temporary copy, never beside the user's file."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase

FAKE_NSYS = """#!/usr/bin/env python3
# Stand-in for `nsys export --type sqlite --output OUT REPORT`: records its arguments and writes
# the export kbase asked for from a prepared file.
import json, shutil, sys
args = sys.argv[1:]
json.dump(args, open({log!r}, "w"))
out = args[args.index("--output") + 1]
shutil.copyfile({source!r}, out)
"""


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.mark.slow
def test_report_is_exported_beside_a_temp_copy(tmp_path, monkeypatch):
    export = tmp_path / "prepared.sqlite"
    generate_export(export, ExportSpec(n_gpus=1, iterations=4, seed=3))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "nsys-args.json"
    fake = bindir / "nsys"
    fake.write_text(FAKE_NSYS.format(log=str(log), source=str(export)))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    user_dir = tmp_path / "user"
    user_dir.mkdir()
    report = user_dir / "train.nsys-rep"
    report.write_bytes(b"not really a report, the fake nsys ignores it")
    before = (_sha(report), sorted(p.name for p in user_dir.iterdir()))
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    res = run_kbase("top", str(report), "--format", "json", "--limit", "0", subprocess=True)
    assert res.rc == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["summary"]["source"] == str(report)
    args = json.loads(log.read_text())
    assert args[:3] == ["export", "--type", "sqlite"]
    exported_to = Path(args[args.index("--output") + 1])
    assert exported_to.parent != user_dir and not exported_to.exists()  # temp dir, cleaned up
    assert (_sha(report), sorted(p.name for p in user_dir.iterdir())) == before


def test_report_without_nsys_says_how_to_export(tmp_path, monkeypatch):
    report = tmp_path / "train.nsys-rep"
    report.write_bytes(b"\x00report")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    res = run_kbase("top", str(report))
    assert res.rc == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "nsys export --type sqlite" in lines[0] and str(report) in lines[0]
