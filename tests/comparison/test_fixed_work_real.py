"""A real capture without iteration markers (CloverLeaf, an HPC code run once: ../shared/data/nsys) compared with
copies of itself whose top kernel is slower: per run, not per window-second (docs/diff.md "Units")."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

import kbase
from kbase.api.comparing import _decide
from kbase.comparison.side import Unit
from kbase.enums import GateStatus, KernelClass

from helpers.shared import require_shared


def _top_slower(src: Path, dst: Path, factor: float) -> tuple[str, float]:
    """A copy of ``src`` with every launch of its top kernel ``factor`` times as long; (its name, its share of the
    kernel time)."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        top, top_ns = con.execute("SELECT demangledName, SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL "
                                  "GROUP BY demangledName ORDER BY 2 DESC LIMIT 1").fetchone()
        all_ns, = con.execute("SELECT SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + CAST(ROUND((end - start) * ?) AS INTEGER) "
                    "WHERE demangledName = ?", (factor, top))
        con.commit()
        name, = con.execute("SELECT value FROM StringIds WHERE id = ?", (top,)).fetchone()
    finally:
        con.close()
    return str(name), top_ns / all_ns


@pytest.fixture(scope="module")
def clover():
    return require_shared("a100_cloverleaf.sqlite")


def _gate(a: Path, b: Path, tmp_path: Path):
    comparison = kbase.compare(str(a), str(b), kbase.Settings.load(repo=tmp_path))
    return comparison, _decide(comparison, [], False, False).verdict


def test_real_fixed_work_slowed_25_percent_fails_both_ways_round(clover, tmp_path):
    before = clover.read_bytes()
    slow = tmp_path / "slow.sqlite"
    name, _ = _top_slower(clover, slow, 1.25)
    forward, verdict = _gate(clover, slow, tmp_path)
    backward, reverse = _gate(slow, clover, tmp_path)
    assert forward.result.totals.unit == Unit.RUN
    fwd = next(r for r in forward.result.records() if r["name"] == name)
    bwd = next(r for r in backward.result.records() if r["name"] == name)
    assert fwd["class"] == KernelClass.REGRESSED and fwd["delta_pct"] == pytest.approx(25, abs=0.5)
    assert bwd["class"] == KernelClass.IMPROVED and bwd["z"] == pytest.approx(-fwd["z"])
    assert verdict.status == GateStatus.FAIL and reverse.status == GateStatus.PASS
    assert clover.read_bytes() == before


def test_real_fixed_work_total_is_reported_as_it_changed(clover, tmp_path):
    """The top kernel slowed so that all kernel time grows 1.3%: the diff says +1.3%."""
    probe = tmp_path / "probe.sqlite"
    _, share = _top_slower(clover, probe, 1.0)
    slow = tmp_path / "slow.sqlite"
    _top_slower(clover, slow, 1 + 0.013 / share)
    comparison, _ = _gate(clover, slow, tmp_path)
    assert comparison.result.totals.unit == Unit.RUN
    assert comparison.result.totals.kernel.delta_pct == pytest.approx(1.3, abs=0.05)
