"""Issue 12: NVTX_EVENTS is read whatever naming columns an exporter wrote.

Before: an export whose NVTX_EVENTS has no ``text`` or no ``textId`` column failed with an SQL
syntax error (``e.NULL``). Now a range is named from ``text``, else from ``textId`` (StringIds),
else it has no name; a table without ``end`` or ``globalTid`` still reads; one without ``start``
or ``eventType`` is ignored with a note; ranges with broken timestamps are left out with a note.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from kbase.analysis.window import WindowSpec, select_window
from kbase.readers import read_profile
from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase
from helpers.kineto_traces import folder_state

ALL = ["start", "end", "eventType", "globalTid", "text", "textId"]


@pytest.fixture(scope="module", params=[False, True], ids=["names-in-text", "names-by-textId"])
def export(request, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("nvtx") / "export.sqlite"
    generate_export(path, ExportSpec(n_gpus=1, iterations=4, seed=9, nvtx_text_ids=request.param))
    return path


def with_nvtx_columns(src: Path, folder: Path, columns: list[str], *statements: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "export.sqlite"
    shutil.copyfile(src, path)
    conn = sqlite3.connect(path)
    conn.executescript(f"CREATE TABLE n2 AS SELECT {', '.join(columns)} FROM NVTX_EVENTS; DROP TABLE NVTX_EVENTS; "
                       "ALTER TABLE n2 RENAME TO NVTX_EVENTS;")
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()
    return path


def _uses_text_ids(path: Path) -> bool:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute("SELECT count(*) FROM NVTX_EVENTS WHERE textId IS NOT NULL").fetchone()[0] > 0
    finally:
        conn.close()


@pytest.mark.parametrize("drop", [["text", "textId"], ["text"], ["textId"]])
def test_nvtx_without_naming_columns_reads(export, tmp_path, drop):
    path = with_nvtx_columns(export, tmp_path / "in", [c for c in ALL if c not in drop])
    before = folder_state(path.parent)
    res = run_kbase("top", path, "--format", "json")
    assert res.rc == 0, res
    prof = read_profile(path)
    names_left = ("textId" not in drop) if _uses_text_ids(export) else ("text" not in drop)
    steps = int(prof.ranges["name"].str.startswith("ProfilerStep#").sum())
    mode = select_window(prof, WindowSpec()).mode
    assert (steps, mode) == ((4, "iterations") if names_left else (0, "whole"))
    assert folder_state(path.parent) == before


@pytest.mark.parametrize("drop", ["end", "globalTid"])
def test_nvtx_without_end_or_thread_reads_and_says_why_markers_do_not_serve(export, tmp_path, drop):
    """Ranges that never close, or belong to no thread, cannot hold a step: one clear line."""
    path = with_nvtx_columns(export, tmp_path / "in", [c for c in ALL if c != drop])
    prof = read_profile(path)
    assert len(prof.ranges) and prof.ranges["start"].dtype == "int64"
    res = run_kbase("top", path)
    assert res.rc == 2 and len(res.stderr.strip().splitlines()) == 1, res
    assert "ProfilerStep#N" in res.stderr and "allow-missing-ranks" not in res.stderr


def test_nvtx_without_start_is_ignored_with_a_note(export, tmp_path):
    path = with_nvtx_columns(export, tmp_path / "in", ["end", "eventType", "globalTid", "text", "textId"])
    prof = read_profile(path)
    assert prof.ranges.empty and any("NVTX_EVENTS has no start" in n for n in prof.extra["notes"])


def test_nvtx_ranges_with_broken_times_are_left_out_with_a_note(export, tmp_path):
    path = with_nvtx_columns(export, tmp_path / "in", ALL,
                             "UPDATE NVTX_EVENTS SET start = NULL WHERE rowid = 1",
                             "UPDATE NVTX_EVENTS SET end = start - 5 WHERE rowid = 2",
                             "UPDATE NVTX_EVENTS SET start = 'later' WHERE rowid = 3")
    prof = read_profile(path)
    assert any("ignored 3 of" in n and "NVTX ranges" in n for n in prof.extra["notes"])
    assert (prof.ranges["start"] >= 0).all() and prof.ranges["start"].dtype == "int64"
