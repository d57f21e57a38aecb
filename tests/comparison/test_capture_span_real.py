"""Capture spans of the real exports (../shared/data): four Nsight Systems captures of whole programs, one export
cut from a longer capture, Kineto traces taken on a schedule; and a real whole-program capture whose top kernel
family launches twice as often (each launch split in halves, as a new block size would) compared per run."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

import kbase
from kbase.analysis.leaderboard import build_leaderboard
from kbase.analysis.span import PROGRAM, RANGE, SLICE
from kbase.analysis.window import WindowSpec, select_window
from kbase.api.comparing import _decide
from kbase.comparison.side import Unit
from kbase.enums import GateStatus, KernelClass
from kbase.readers import read_profile

from helpers.shared import KINETO_DIR, require_shared


def _span(path: Path) -> tuple[str | None, str]:
    summary = build_leaderboard(select_window(read_profile(path), WindowSpec())).summary
    return summary.capture_span, summary.capture_span_why or ""


@pytest.mark.parametrize(("name", "kind"), [
    ("a100_cloverleaf.sqlite", PROGRAM), ("a100_mmagic_vsr.sqlite", PROGRAM), ("a100_saxpy_mpi.sqlite", PROGRAM),
    ("h200_nvfuser_crossentropy.sqlite", PROGRAM), ("h100_2gpu_fsdp_t5.sqlite", SLICE),
])
def test_real_nsys_exports_say_what_they_span(name, kind):
    path = require_shared(name)
    before = path.read_bytes()
    got, why = _span(path)
    assert got == kind, why
    if name.startswith("h100_2gpu"):  # the fixture was cut from a 295 s session: it lost half its launch calls
        assert why.startswith("1810 kernel(s) have no launch call")
    if name == "a100_saxpy_mpi.sqlite":  # a 2.x export: no capture settings, its session and launches decide
        assert "(no capture settings in the export)" in why
    assert path.read_bytes() == before


def test_real_kineto_traces_on_a_schedule_are_ranges():
    require_shared()
    for path in sorted(KINETO_DIR.glob("*.gz"))[:3]:
        assert _span(path)[0] == RANGE, path


def _split_launches(src: Path, dst: Path, factor: float = 1.0) -> str:
    """A copy of ``src`` whose top kernel's family (its short name: every template variant) launches twice as
    often, each launch split into two halves as a new block size would split its work (``factor``: each half
    that much longer); the top kernel's name."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        top, short = con.execute("SELECT demangledName, shortName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY "
                                 "demangledName ORDER BY SUM(end - start) DESC LIMIT 1").fetchone()
        cols = [r[1] for r in con.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
        at = {c: i for i, c in enumerate(cols)}
        rows = con.execute("SELECT rowid, * FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE shortName = ?", (short,)).fetchall()
        halves = []
        for rowid, *row in rows:
            start, end = row[at["start"]], row[at["end"]]
            mid = start + (end - start) // 2
            first, second = list(row), list(row)
            first[at["end"]] = start + round((mid - start) * factor)
            second[at["start"]], second[at["end"]] = mid, mid + round((end - mid) * factor)
            con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE rowid = ?", (rowid,))
            halves += [first, second]
        con.executemany(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES ({','.join('?' * len(cols))})", halves)
        con.commit()
        name, = con.execute("SELECT value FROM StringIds WHERE id = ?", (top,)).fetchone()
    finally:
        con.close()
    return str(name)


def _without_session(src: Path, dst: Path) -> Path:
    """A copy of ``src`` without its capture settings and session: an export that does not say what it spans."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    con.execute("DROP TABLE ANALYSIS_DETAILS")
    con.execute("DROP TABLE META_DATA_CAPTURE")
    con.commit()
    con.close()
    return dst


def test_a_real_whole_program_whose_launches_split_is_compared_per_run(tmp_path):
    clover = require_shared("a100_cloverleaf.sqlite")
    before = clover.read_bytes()
    settings = kbase.Settings.load(repo=tmp_path)
    split = tmp_path / "split.sqlite"
    name = _split_launches(clover, split)
    comparison = kbase.compare(str(clover), str(split), settings)
    totals = comparison.result.totals
    assert totals.unit == Unit.RUN and totals.unit_reason == "no iteration markers; both captures span their whole program"
    row = next(r for r in comparison.result.records() if r["name"] == name)
    assert row["count_after"] == 2 * row["count_before"]
    assert row["class"] in (KernelClass.UNCHANGED, KernelClass.WITHIN_NOISE) and abs(row["delta_pct"]) < 0.1
    assert _decide(comparison, [], False, False).verdict.status == GateStatus.PASS
    slower = tmp_path / "slower.sqlite"
    _split_launches(clover, slower, 1.25)
    comparison = kbase.compare(str(clover), str(slower), settings)
    assert comparison.result.totals.unit == Unit.RUN
    assert comparison.result.totals.kernel.delta_pct > 5
    assert _decide(comparison, [], False, False).verdict.status == GateStatus.FAIL
    # the same pair from exports that do not say what they span: the changed launch counts make it slices
    blind = kbase.compare(str(_without_session(clover, tmp_path / "a.sqlite")),
                          str(_without_session(split, tmp_path / "b.sqlite")), settings)
    assert blind.result.totals.unit == Unit.WINDOW_SECOND
    assert clover.read_bytes() == before
