"""Issue 12: hostile or careless inputs to the readers, beyond the named classes.

Every case is run through ``kbase top --format json`` and must end in exit 0 (output that parses
and encodes as UTF-8) or exit 2 with one line on stderr that names the file — never a traceback
or exit 3 — and must leave the input's folder byte-identical with no new file. The cases:

- names no output can carry (lone surrogates, NUL, invalid UTF-8) are replaced with U+FFFD and
  noted; other characters (terminal escapes, markup) are data and reach the output unchanged,
  for the renderers to neutralise;
- names stored as BLOB or number, missing names, empty or NULL-laden side tables;
- integers beyond any limit (a 5000-digit JSON number, a huge or negative process id), JSON
  nested 100 000 deep, events that are not objects, ids that are lists;
- a pipe, a link loop, a folder named like a trace, a UTF-16 file, a SQLite header over garbage.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase
from helpers.kineto_traces import edit, folder_state, trace_doc, write_trace

K = "CUPTI_ACTIVITY_KIND_KERNEL"
FULL_HASH = "fedcba9876543210fedcba9876543210fedcba98"


def check(path: Path, folder: Path | None = None, expect: int | None = None) -> tuple[int, dict | str]:
    """Run top on ``path``; assert the contract; return (rc, JSON document or the error line)."""
    folder = folder or path.parent
    before = folder_state(folder)
    res = run_kbase("top", path, "--format", "json", "--limit", "0")
    assert "Traceback" not in res.stderr and res.rc in (0, 2), res
    if expect is not None:
        assert res.rc == expect, res
    assert folder_state(folder) == before, "the input's folder changed"
    if res.rc == 2:
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and (str(path) in lines[0] or str(folder) in lines[0]), res
        return 2, lines[0]
    res.stdout.encode("utf-8")  # no lone surrogate reaches the output
    return 0, json.loads(res.stdout)


# --------------------------------------------------------------------------------------------
# nsys


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("src") / "export.sqlite"
    generate_export(path, ExportSpec(n_gpus=2, iterations=3, seed=4))
    return path


def variant(export: Path, folder: Path, *statements: str) -> Path:
    folder.mkdir()
    path = folder / "export.sqlite"
    shutil.copyfile(export, path)
    conn = sqlite3.connect(path)
    for sql in statements:
        conn.execute(sql)
    conn.commit()
    conn.close()
    return path


MARKUP = "\x1b[2Jx[/bold]<!--"
FIRST_NAME = f"(SELECT demangledName FROM {K} WHERE rowid = 1)"
NSYS_NAMES = {
    "invalid-utf8": (f"UPDATE StringIds SET value = CAST(x'41ffeda08042' AS TEXT) WHERE id = {FIRST_NAME}",
                     "A\ufffd", "not valid UTF-8"),
    "nul": (f"UPDATE StringIds SET value = CAST(x'4100420043' AS TEXT) WHERE id = {FIRST_NAME}",
            "A\ufffdB\ufffdC", "NUL"),
    "blob": (f"UPDATE StringIds SET value = x'626c6f625f6b65726e656c' WHERE id = {FIRST_NAME}", "blob_kernel", None),
    "number": (f"UPDATE StringIds SET value = 12345 WHERE id = {FIRST_NAME}", "12345", None),
    "escape-and-markup": (f"UPDATE StringIds SET value = CAST(x'{MARKUP.encode().hex()}' AS TEXT) WHERE id = {FIRST_NAME}",
                          MARKUP, None),
}


@pytest.mark.parametrize("case", list(NSYS_NAMES))
def test_nsys_odd_names(export, tmp_path, case):
    sql, shown, note = NSYS_NAMES[case]
    path = variant(export, tmp_path / "in", sql)
    _, doc = check(path, expect=0)
    assert any(k["name"].startswith(shown) for k in doc["kernels"]), [k["name"] for k in doc["kernels"]]
    if note:
        assert any(note in n for n in doc["notes"]), doc["notes"]


NSYS_CASES = {
    "empty-string-table": ("DELETE FROM StringIds",),
    "gpu-table-nulls": ("CREATE TABLE g AS SELECT * FROM TARGET_INFO_GPU", "UPDATE g SET id = NULL, name = NULL",
                        "DROP TABLE TARGET_INFO_GPU", "ALTER TABLE g RENAME TO TARGET_INFO_GPU"),
    "meta-nulls": ("UPDATE META_DATA_EXPORT SET value = NULL",),
    "negative-process-id": (f"UPDATE {K} SET globalPid = -1 WHERE rowid = 3",),
    "huge-process-id": (f"UPDATE {K} SET globalPid = 9223372036854775807 WHERE rowid = 3",),
    "huge-correlation": (f"UPDATE {K} SET correlationId = 1 << 40 WHERE rowid = 3",),
    "negative-short-name": (f"UPDATE {K} SET shortName = -7 WHERE rowid = 3",),
    "empty-runtime": ("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME",),
    "empty-nvtx": ("DELETE FROM NVTX_EVENTS",),
    "empty-kernels": (f"DELETE FROM {K}",),
    "kernel-table-is-a-view": (f"ALTER TABLE {K} RENAME TO kk", f"CREATE VIEW {K} AS SELECT * FROM kk"),
    "no-device-column": (f"CREATE TABLE k3 AS SELECT start, end, globalPid, demangledName FROM {K}",
                         f"DROP TABLE {K}", f"ALTER TABLE k3 RENAME TO {K}"),
    "string-table-without-values": ("CREATE TABLE s AS SELECT id FROM StringIds", "DROP TABLE StringIds",
                                    "ALTER TABLE s RENAME TO StringIds"),
    "duplicate-string-ids": ("CREATE TABLE s AS SELECT * FROM StringIds", "INSERT INTO s SELECT * FROM StringIds",
                             "DROP TABLE StringIds", "ALTER TABLE s RENAME TO StringIds"),
    "nvtx-huge-thread": ("UPDATE NVTX_EVENTS SET globalTid = 9223372036854775807 WHERE rowid = 1",),
    "nvtx-text-event-type": ("UPDATE NVTX_EVENTS SET eventType = 'push' WHERE rowid = 1",),
}


@pytest.mark.parametrize("case", list(NSYS_CASES))
def test_nsys_hostile_tables(export, tmp_path, case):
    check(variant(export, tmp_path / "in", *NSYS_CASES[case]))


def test_nsys_garbage_after_a_sqlite_header(tmp_path, export):
    (tmp_path / "in").mkdir()
    garbage = tmp_path / "in" / "garbage.sqlite"
    garbage.write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    assert check(garbage, expect=2)[0] == 2
    cut = tmp_path / "in" / "cut.sqlite"
    blob = export.read_bytes()
    cut.write_bytes(blob[: len(blob) // 3])
    assert check(cut, expect=2)[0] == 2


def test_nsys_cleaned_names_can_be_stored(export, tmp_path):
    path = variant(export, tmp_path / "in", NSYS_NAMES["nul"][0])
    res = run_kbase("snapshot", path, "--db", f"sqlite:///{tmp_path / 'store.db'}", "--no-git", "--rev", FULL_HASH,
                    "--format", "json")
    assert res.rc == 0, res


# --------------------------------------------------------------------------------------------
# Kineto


def _rename_last_kernel(name) -> callable:
    def change(d):
        [e for e in d["traceEvents"] if e.get("cat") == "kernel"][-1]["name"] = name  # in the window
    return change


KINETO_NAMES = {
    "lone-surrogate": ("\ud800bad", "\ufffdbad", True),
    "nul": ("a\x00b", "a\ufffdb", True),
    "escape-and-markup": ("\x1b[2Jx[/bold]<!--", "\x1b[2Jx[/bold]<!--", False),
}


@pytest.mark.parametrize("case", list(KINETO_NAMES))
def test_kineto_odd_names(tmp_path, case):
    raw, shown, noted = KINETO_NAMES[case]

    def change(d):
        _rename_last_kernel(raw)(d)
        step = next(e for e in d["traceEvents"] if e.get("name") == "ProfilerStep#2")
        d["traceEvents"].append(dict(step, name=f"range {raw}", cat="cpu_op"))
        d["traceEvents"].insert(0, {"ph": "M", "name": "thread_name", "pid": 4000, "tid": 4001, "args": {"name": raw}})

    (tmp_path / "in").mkdir()
    p = write_trace(tmp_path / "in" / "rank0.json", edit(trace_doc(0, 1), change))
    _, doc = check(p, expect=0)
    assert shown in {k["name"] for k in doc["kernels"]}
    assert any("U+FFFD" in n for n in doc["notes"]) == noted
    res = run_kbase("snapshot", p, "--db", f"sqlite:///{tmp_path / 'store.db'}", "--no-git", "--rev", FULL_HASH)
    assert res.rc == 0, res


KINETO_TEXTS = {
    "5000-digit-number": lambda: json.dumps(trace_doc(0, 1)).replace('"dur": 900', '"dur": ' + "9" * 5000, 1),
    "nested-100000-deep": lambda: '{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}",
    "nested-metadata": lambda: '{"x": ' + "[" * 100_000 + "]" * 100_000 + ', "traceEvents": []}',
    "events-not-objects": lambda: '{"traceEvents": [1, "a", null, [], {"cat": "kernel", "ph": "X", "ts": 1, "dur": 1}]}',
    "utf-16": lambda: json.dumps(trace_doc(0, 1)).encode("utf-16"),
    "exponent-timestamp": lambda: json.dumps(trace_doc(0, 1)).replace('"ts": 1030.0', '"ts": 1e400', 1),
    "list-ids": lambda: json.dumps(edit(trace_doc(0, 1), lambda d: [e.update(pid=[1], tid={"a": 1})
                                        for e in d["traceEvents"] if e.get("cat") == "cuda_runtime"])),
    "categories-and-args-of-odd-types": lambda: json.dumps(edit(trace_doc(0, 1), lambda d: d["traceEvents"] + [
        {"ph": "X", "cat": ["kernel"], "ts": 1, "dur": 1}, {"ph": "X", "cat": "kernel", "ts": 1, "dur": 1, "args": "x"},
    ])),
    "string-rank-and-world": lambda: json.dumps(edit(trace_doc(0, 1), lambda d: d["distributedInfo"].update(
        rank="0", world_size=10**30))),
}


@pytest.mark.parametrize("case", list(KINETO_TEXTS))
def test_kineto_hostile_documents(tmp_path, case):
    (tmp_path / "in").mkdir()
    p = tmp_path / "in" / "rank0.json"
    text = KINETO_TEXTS[case]()
    p.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass"))
    check(p)


def test_a_pipe_in_a_trace_folder_is_an_unreadable_rank(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_trace(run / "rank1.json", trace_doc(1, 2))
    os.mkfifo(run / "rank0.json")
    _, line = check(run, run, expect=2)
    assert "rank0.json: not a regular file" in line
    os.mkfifo(tmp_path / "pipe.sqlite")
    _, line = check(tmp_path / "pipe.sqlite", tmp_path, expect=2)
    assert "not a regular file" in line


def test_a_link_loop_in_a_trace_folder_is_an_unreadable_rank(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    write_trace(run / "rank0.json", trace_doc(0, 2))
    (run / "rank1.json").symlink_to(run / "rank2.json")
    (run / "rank2.json").symlink_to(run / "rank1.json")
    _, line = check(run, run, expect=2)
    assert "rank1.json: cannot read" in line


def test_a_folder_named_like_a_file(tmp_path):
    (tmp_path / "export.sqlite").mkdir()
    _, line = check(tmp_path / "export.sqlite", tmp_path, expect=2)
    assert "is a directory" in line


def test_nvtx_text_that_is_not_utf8_is_replaced_and_noted(export, tmp_path):
    """Range names are decoded by sqlite3 itself; a file with invalid UTF-8 among them is read again through
    the replacing decoder (``nsys_sql.fetch_texts``): the name shows U+FFFD and a note says so."""
    from kbase.readers.nsys import read_nsys

    path = variant(export, tmp_path / "in", "UPDATE NVTX_EVENTS SET text = CAST(x'6f705fff42' AS TEXT) "
                                            "WHERE rowid = (SELECT max(rowid) FROM NVTX_EVENTS)")
    prof = read_nsys(path)
    assert "op_\ufffdB" in set(prof.range_columns.name.tolist())
    assert any("not valid UTF-8" in n for n in prof.extra["notes"]), prof.extra["notes"]
    _, doc = check(path, expect=0)
    assert any("not valid UTF-8" in n for n in doc["notes"])
