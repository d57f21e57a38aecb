"""Issue 12: kernel rows with missing or impossible fields never become data silently.

nsys: NULL start/end/device/name/process, end before start, a negative start, an out-of-range
device or name id, an absurd duration, an end past the session's stop time. Such rows are
counted, excluded and named in a note that every output shows — or the export is refused when
they are more than ``MAX_INVALID_FRACTION`` (1%) of its kernel rows. No phantom GPU appears.
Kineto: kernel events with a missing, non-numeric, negative or absurd ts/dur, or an invalid device,
the same; broken annotation ranges are left out with a note; an invalid ``baseTimeNanoseconds``
refuses the file. The user's file is byte-identical afterwards and nothing is written beside it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from kbase.analysis.window import WindowSpec, select_window
from kbase.errors import InputError
from kbase.readers import read_profile
from kbase.readers.integrity import MAX_INVALID_FRACTION
from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase
from helpers.kineto_traces import edit, folder_state, trace_doc, write_trace

K = "CUPTI_ACTIVITY_KIND_KERNEL"


@pytest.fixture(scope="module")
def clean_export(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("clean") / "clean.sqlite"
    generate_export(path, ExportSpec(n_gpus=2, iterations=3, seed=11))
    return path


def damaged(clean: Path, folder: Path, *statements: str) -> Path:
    """A copy of ``clean`` whose kernel table accepts NULLs, changed by ``statements``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "damaged.sqlite"
    shutil.copyfile(clean, path)
    conn = sqlite3.connect(path)
    conn.executescript(f"CREATE TABLE k2 AS SELECT * FROM {K}; DROP TABLE {K}; ALTER TABLE k2 RENAME TO {K};")
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()
    return path


def top_json(path: Path) -> dict:
    res = run_kbase("top", path, "--format", "json", "--limit", "0", "--per-gpu")
    assert res.rc == 0, res
    return json.loads(res.stdout)


def n_rows(path: Path) -> int:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    try:
        return conn.execute(f"SELECT count(*) FROM {K}").fetchone()[0]
    finally:
        conn.close()


ONE_BAD_ROW = {
    "null-start": (f"UPDATE {K} SET start = NULL WHERE rowid = 50", "without a valid start time"),
    "null-end": (f"UPDATE {K} SET end = NULL WHERE rowid = 50", "without a valid end time"),
    "text-start": (f"UPDATE {K} SET start = 'not a time' WHERE rowid = 50", "without a valid start time"),
    "text-end-late-in-the-table": (f"UPDATE {K} SET end = 'soon' WHERE rowid = 5000", "without a valid end time"),
    "fractional-start": (f"UPDATE {K} SET start = start + 0.5 WHERE rowid = 5000", "without a valid start time"),
    "end-before-start": (f"UPDATE {K} SET end = start - 1000 WHERE rowid = 50", "ending before they start"),
    "negative-start": (f"UPDATE {K} SET start = -5, end = 10 WHERE rowid = 50", "with a negative start time"),
    "null-device": (f"UPDATE {K} SET deviceId = NULL WHERE rowid = 50", "without a valid device id"),
    "device-out-of-range": (f"UPDATE {K} SET deviceId = 300 WHERE rowid = 50", "without a valid device id"),
    "null-name": (f"UPDATE {K} SET demangledName = NULL WHERE rowid = 50", "without a valid name id"),
    "huge-name-id": (f"UPDATE {K} SET demangledName = 1 << 40 WHERE rowid = 50", "without a valid name id"),
    "null-process": (f"UPDATE {K} SET globalPid = NULL WHERE rowid = 50", "without a process id"),
    "absurd-duration": (f"UPDATE {K} SET end = start + (1 << 62) WHERE rowid = 50", "running longer than 18 minutes"),
}


@pytest.mark.parametrize("case", list(ONE_BAD_ROW))
def test_a_bad_kernel_row_is_excluded_and_noted(clean_export, tmp_path, case):
    sql, reason = ONE_BAD_ROW[case]
    path = damaged(clean_export, tmp_path / "in", sql)
    before = folder_state(path.parent)
    ref, doc = top_json(clean_export), top_json(path)
    total = n_rows(path)
    note = f"excluded 1 of {total:,} kernel rows with missing or invalid fields (1 {reason}"
    assert any(n.startswith(note) for n in doc["notes"]), doc["notes"]
    # no phantom GPU, no absurd total: the run is the clean one minus at most that one launch
    s, r = doc["summary"], ref["summary"]
    assert s["gpus"] == r["gpus"] == 2
    assert r["launches"] - 1 <= s["launches"] <= r["launches"]
    assert s["total_kernel_ns"] <= r["total_kernel_ns"] and s["window_ns"] <= r["window_ns"]
    assert sorted({k["gpu"] for k in doc["kernels"]}) == sorted({k["gpu"] for k in ref["kernels"]})
    assert folder_state(path.parent) == before


def test_more_bad_rows_than_a_trace_refuse_the_export(clean_export, tmp_path):
    total = n_rows(clean_export)
    n_bad = int(total * MAX_INVALID_FRACTION) + 1
    path = damaged(clean_export, tmp_path / "in", f"UPDATE {K} SET end = NULL WHERE rowid <= {n_bad}")
    before = folder_state(path.parent)
    res = run_kbase("top", path)
    assert res.rc == 2, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and f"{n_bad:,} of {total:,} kernel rows" in lines[0]
    assert "refusing" in lines[0]
    assert folder_state(path.parent) == before


def test_the_threshold_itself_is_still_read(clean_export, tmp_path):
    total = n_rows(clean_export)
    n_bad = int(total * MAX_INVALID_FRACTION)
    path = damaged(clean_export, tmp_path / "in", f"UPDATE {K} SET end = start - 1 WHERE rowid <= {n_bad}")
    prof = read_profile(path)
    assert len(prof.kernels) == total - n_bad and prof.n_gpus == 2


def test_no_process_id_anywhere_is_one_process_not_a_loss(clean_export, tmp_path):
    path = damaged(clean_export, tmp_path / "in", f"UPDATE {K} SET globalPid = NULL")
    prof = read_profile(path)
    assert len(prof.kernels) == n_rows(path) and prof.n_gpus == 2 and not prof.extra.get("notes")
    assert set(prof.gpus["pid"]) == {0}


def test_an_end_past_the_session_stop_is_excluded(clean_export, tmp_path):
    path = damaged(
        clean_export, tmp_path / "in",
        "CREATE TABLE ANALYSIS_DETAILS (globalVid INTEGER, duration INTEGER, startTime INTEGER, stopTime INTEGER)",
        f"INSERT INTO ANALYSIS_DETAILS SELECT 0, max(end), 0, max(end) FROM {K}",
        f"UPDATE {K} SET end = end + 100 * 1000000000 WHERE rowid = 7",
    )
    prof = read_profile(path)
    assert any("1 ending after the capture ended" in n for n in prof.extra["notes"])
    assert len(prof.kernels) == n_rows(path) - 1


def test_text_in_the_runtime_table_costs_only_that_launch(clean_export, tmp_path):
    path = damaged(clean_export, tmp_path / "in",
                   "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = 'main thread' WHERE rowid = 4000")
    prof = read_profile(path)
    assert len(prof.kernels) == n_rows(path)
    assert (prof.kernels["launch_start"] < 0).sum() <= 1


def test_notes_reach_the_window_and_markdown(clean_export, tmp_path):
    path = damaged(clean_export, tmp_path / "in", f"UPDATE {K} SET start = NULL WHERE rowid = 3")
    w = select_window(read_profile(path), WindowSpec())
    assert any("excluded 1 of" in n for n in w.notes)
    res = run_kbase("top", path, "--format", "md")
    assert res.rc == 0 and "excluded 1 of" in res.stdout


# --------------------------------------------------------------------------------------------
# Kineto


def _with_bad_kernels(doc: dict, n_bad: int, how) -> dict:
    def change(d):
        kernels = [e for e in d["traceEvents"] if e.get("cat") == "kernel"]
        for e in kernels[:n_bad]:
            how(e)
    return edit(doc, change)


KINETO_BAD = {
    "missing-dur": (lambda e: e.pop("dur"), "without a valid dur"),
    "negative-dur": (lambda e: e.update(dur=-3), "with a negative dur"),
    "missing-ts": (lambda e: e.pop("ts"), "without a valid ts"),
    "text-ts": (lambda e: e.update(ts="soon"), "without a valid ts"),
    "huge-ts": (lambda e: e.update(ts=10**30), "without a valid ts"),
    "nan-dur": (lambda e: e.update(dur=float("nan")), "without a valid dur"),
    "absurd-dur": (lambda e: e.update(dur=10**13), "running longer than 18 minutes"),
    "huge-device": (lambda e: e["args"].update(device=2**70), "with an invalid device"),
}


@pytest.mark.parametrize("case", list(KINETO_BAD))
def test_kineto_bad_kernel_events_are_excluded_and_noted(tmp_path, case):
    how, reason = KINETO_BAD[case]
    good = trace_doc(0, 1, steps=100)  # 200 kernels: 2 bad ones are a trace (1%)
    (tmp_path / "in").mkdir()
    p = write_trace(tmp_path / "in" / "rank0.json", _with_bad_kernels(good, 2, how))
    before = folder_state(p.parent)
    prof = read_profile(p)
    assert len(prof.kernels) == 198 and prof.n_gpus == 1
    assert prof.extra["notes"] == [f"excluded 2 of 200 kernel events with missing or invalid fields (2 {reason})"]
    res = run_kbase("top", p, "--format", "json")
    assert res.rc == 0 and any("excluded 2 of 200" in n for n in json.loads(res.stdout)["notes"])
    assert folder_state(p.parent) == before


def test_kineto_too_many_bad_kernel_events_refuse_the_file(tmp_path):
    p = write_trace(tmp_path / "rank0.json", _with_bad_kernels(trace_doc(0, 1, steps=10), 5, lambda e: e.pop("dur")))
    with pytest.raises(InputError, match=r"5 of 20 kernel events .* refusing"):
        read_profile(p)


def test_kineto_broken_ranges_are_left_out_with_a_note(tmp_path):
    def break_first_step(d):
        step = next(e for e in d["traceEvents"] if e.get("name") == "ProfilerStep#1")
        step["dur"] = -10

    p = write_trace(tmp_path / "rank0.json", edit(trace_doc(0, 1), break_first_step))
    prof = read_profile(p)
    assert "ProfilerStep#1" not in set(prof.ranges["name"])
    assert any("ignored 1 annotation ranges (1 with a negative dur)" in n for n in prof.extra["notes"])


@pytest.mark.parametrize("base", [-5, "yesterday", 2**63, 1234.5, [1]])
def test_kineto_invalid_base_time_refuses_the_file(tmp_path, base):
    p = write_trace(tmp_path / "rank0.json", trace_doc(0, 1, base_ns=None) | {"baseTimeNanoseconds": base})
    res = run_kbase("top", p)
    assert res.rc == 2, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "baseTimeNanoseconds" in lines[0] and str(p) in lines[0]


def test_kineto_huge_correlation_and_odd_ids_do_not_break_the_read(tmp_path):
    def odd(d):
        for e in d["traceEvents"]:
            if e.get("cat") == "cuda_runtime":
                e["tid"] = ["not", "an", "id"]
        first = next(e for e in d["traceEvents"] if e.get("cat") == "kernel")
        first["args"]["correlation"] = 2**70

    prof = read_profile(write_trace(tmp_path / "rank0.json", edit(trace_doc(0, 1), odd)))
    assert len(prof.kernels) == 8 and (prof.kernels["launch_start"] >= 0).sum() == 7
