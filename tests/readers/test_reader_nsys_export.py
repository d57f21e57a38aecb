"""Issue 12: ``nsys export`` of a .nsys-rep runs with a time limit and leaves nothing behind.

A stand-in ``nsys`` on PATH plays each case: it hangs (and starts a child that hangs too), fails,
or is interrupted by Ctrl-C. On every path kbase exits 2 with one line (or re-raises the
KeyboardInterrupt), kills the whole export process group, removes its temporary folder, and
leaves the user's report and folder byte-identical. ``KBASE_NSYS_TIMEOUT`` is validated.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from kbase.errors import InputError
from kbase.readers import read_profile
from kbase.readers.nsys_report import DEFAULT_TIMEOUT_S, TIMEOUT_ENV, export_timeout
from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase
from helpers.kineto_traces import folder_state

HANGING_NSYS = """#!/bin/sh
# records its pid, starts a child that outlives it unless the group is killed, then hangs
echo $$ > {pids}
sleep 300 &
echo $! >> {pids}
out=""
while [ $# -gt 0 ]; do [ "$1" = "--output" ] && out="$2"; shift; done
echo partial > "$out"
wait
"""
FAILING_NSYS = """#!/bin/sh
echo "QdstrmImporter: the report is corrupt" >&2
exit 1
"""
WORKING_NSYS = """#!/bin/sh
out=""
while [ $# -gt 0 ]; do [ "$1" = "--output" ] && out="$2"; shift; done
cp {export} "$out"
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has exited


def _gone(pids: list[int], within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def setup(tmp_path, monkeypatch):
    """(user folder with train.nsys-rep, private TMPDIR, function installing a fake nsys)."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "train.nsys-rep").write_bytes(b"not really a report: the fake nsys ignores it")
    tmp = tmp_path / "tmpdir"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")

    def install(script: str) -> None:
        fake = bindir / "nsys"
        fake.write_text(script)
        fake.chmod(fake.stat().st_mode | stat.S_IEXEC)

    return user, tmp, install


@pytest.mark.slow
def test_a_hanging_export_is_stopped_at_the_timeout(setup, tmp_path, monkeypatch):
    user, tmp, install = setup
    pids = tmp_path / "pids"
    install(HANGING_NSYS.format(pids=pids))
    monkeypatch.setenv(TIMEOUT_ENV, "1")
    before = folder_state(user)
    started = time.monotonic()
    res = run_kbase("top", user / "train.nsys-rep")
    assert time.monotonic() - started < 30
    assert res.rc == 2, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(user / "train.nsys-rep") in lines[0]
    assert "did not finish within 1 s" in lines[0] and TIMEOUT_ENV in lines[0]
    assert _gone([int(p) for p in pids.read_text().split()]), "nsys or its child still running"
    assert list(tmp.iterdir()) == [] and folder_state(user) == before


def test_a_failing_export_leaves_nothing(setup):
    user, tmp, install = setup
    install(FAILING_NSYS)
    before = folder_state(user)
    res = run_kbase("top", user / "train.nsys-rep")
    assert res.rc == 2, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "nsys export failed (QdstrmImporter: the report is corrupt)" in lines[0]
    assert list(tmp.iterdir()) == [] and folder_state(user) == before


def test_ctrl_c_during_the_export_kills_it_and_cleans_up(setup, tmp_path, monkeypatch):
    user, tmp, install = setup
    pids = tmp_path / "pids"
    install(HANGING_NSYS.format(pids=pids))
    before = folder_state(user)
    real = subprocess.Popen.communicate
    interrupted = []

    def communicate(self, *args, **kwargs):
        if not interrupted:  # the first wait is where Ctrl-C lands
            interrupted.append(True)
            deadline = time.monotonic() + 10
            while not (pids.is_file() and len(pids.read_text().split()) == 2) and time.monotonic() < deadline:
                time.sleep(0.02)
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "communicate", communicate)
    with pytest.raises(KeyboardInterrupt):
        read_profile(user / "train.nsys-rep")
    assert _gone([int(p) for p in pids.read_text().split()]), "nsys or its child still running"
    assert list(tmp.iterdir()) == [] and folder_state(user) == before


def test_a_working_export_is_read_and_cleaned_up(setup, tmp_path, monkeypatch):
    user, tmp, install = setup
    export = tmp_path / "prepared.sqlite"
    generate_export(export, ExportSpec(n_gpus=1, iterations=3, seed=2))
    install(WORKING_NSYS.format(export=export))
    monkeypatch.setenv(TIMEOUT_ENV, "60")
    before = folder_state(user)
    prof = read_profile(user / "train.nsys-rep")
    assert prof.source == user / "train.nsys-rep" and len(prof.kernels)
    assert list(tmp.iterdir()) == [] and folder_state(user) == before


@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf", "nan", "1e999"])
def test_a_bad_timeout_value_is_one_line_naming_the_variable(setup, monkeypatch, value):
    user, tmp, install = setup
    install(FAILING_NSYS)
    monkeypatch.setenv(TIMEOUT_ENV, value)
    res = run_kbase("top", user / "train.nsys-rep")
    assert res.rc == 2, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"kbase: error: {TIMEOUT_ENV}={value}: must be"), lines
    assert list(tmp.iterdir()) == []


def test_timeout_values(monkeypatch):
    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert export_timeout() == DEFAULT_TIMEOUT_S
    monkeypatch.setenv(TIMEOUT_ENV, " 90 ")
    assert export_timeout() == 90.0
    assert export_timeout(2.5) == 2.5  # the parameter wins over the variable
    with pytest.raises(InputError, match="timeout"):
        export_timeout(-1)
