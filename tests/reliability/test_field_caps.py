"""Issue 29, class 8: bounded memory. A name past ``MAX_NAME_CHARS`` (64 Ki characters) is bad input in every
reader and every place a name can sit (kernel, annotation range, thread, process; nsys kernel and short names,
NVTX texts inline or through StringIds, GPU names): exit 2, one line naming the file. A name of exactly the cap
is read. One huge JSON value (a gzip bomb: 2 GiB of one string in a 2 MiB file) is refused before it is decoded:
within seconds, at a peak RSS far below the string (measured in a child process by ``getrusage``)."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kbase.readers.integrity import MAX_NAME_CHARS
from kbase.readers.kineto_json import MAX_VALUE_CHARS
from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import kb
from helpers.kineto_traces import trace_doc, write_trace
from helpers.shared import REPO

SIZES = {"at the cap": (MAX_NAME_CHARS, True), "one past": (MAX_NAME_CHARS + 1, False),
         "1 MiB": (1 << 20, False), "8 MiB": (8 << 20, False)}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check(r, ok: bool, path: Path, what: str) -> None:
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r
    if ok:
        assert r.rc == 0, r
        return
    assert r.rc == 2 and r.stdout == "", r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and f"{what} of more than {MAX_NAME_CHARS:,}" in lines[0], r


# ------------------------------------------------------------------------------------------ Kineto


def _kineto_long(doc: dict, where: str, name: str) -> dict:
    events = doc["traceEvents"]
    if where == "kernel":
        next(e for e in events if e.get("cat") == "kernel")["name"] = name
    elif where == "range":
        next(e for e in events if e.get("cat") == "user_annotation")["name"] = "ProfilerStep#1" if not name else name
        events.append({"ph": "X", "cat": "cpu_op", "name": name, "pid": 4000, "tid": 4001, "ts": 1000, "dur": 1})
    elif where == "thread":
        events.append({"ph": "M", "name": "thread_name", "pid": 4000, "tid": 4001, "args": {"name": name}})
    else:
        assert where == "process"
        events[0]["args"]["name"] = name
    return doc


@pytest.mark.parametrize("gz", [False, True], ids=["json", "json.gz"])
@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("where", ["kernel", "range", "thread", "process"])
def test_kineto_names_past_the_cap_are_refused(tmp_path, where, size, gz):
    n, ok = SIZES[size]
    path = write_trace(tmp_path / ("t.json.gz" if gz else "t.json"),
                       _kineto_long(trace_doc(rank=0, world=None), where, "k" * n))
    before = _digest(path)
    _check(kb("top", path, "--format", "json"), ok, path, f"{where} name")
    assert _digest(path) == before


# ------------------------------------------------------------------------------------------ nsys


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("caps")
    return generate_export(d / "p.sqlite", ExportSpec(n_gpus=1, iterations=4, seed=2, nvtx_text_ids=False)).path


def _nsys_long(conn: sqlite3.Connection, where: str, name: str) -> str:
    """Put ``name`` where ``where`` says; returns the kind of name the error must say."""
    if where == "kernel after a NUL":  # (SQLite's text functions stop at a NUL: the cap must not)
        where, name = "kernel", "k\x00" + name[2:]
    if where in ("kernel", "short"):
        col = "demangledName" if where == "kernel" else "shortName"
        sid = conn.execute(f"SELECT {col} FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
        conn.execute("UPDATE StringIds SET value = ? WHERE id = ?", (name, sid))
        return "kernel name"
    if where == "nvtx text":
        conn.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = (SELECT min(rowid) FROM NVTX_EVENTS)", (name,))
        return "NVTX range name"
    if where == "nvtx textId":
        sid = conn.execute("SELECT max(id) + 1 FROM StringIds").fetchone()[0]
        conn.execute("INSERT INTO StringIds VALUES (?, ?)", (sid, name))
        conn.execute("UPDATE NVTX_EVENTS SET text = NULL, textId = ? WHERE rowid = (SELECT min(rowid) FROM NVTX_EVENTS)",
                     (sid,))
        return "NVTX range name"
    if where == "blob name":
        sid = conn.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
        conn.execute("UPDATE StringIds SET value = ? WHERE id = ?", (name.encode(), sid))
        return "kernel name"
    assert where == "gpu"
    conn.execute("UPDATE TARGET_INFO_GPU SET name = ?", (name,))
    return "GPU name"


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("where", ["kernel", "short", "kernel after a NUL", "nvtx text", "nvtx textId", "blob name",
                                   "gpu"])
def test_nsys_names_past_the_cap_are_refused(export, tmp_path, where, size):
    n, ok = SIZES[size]
    path = tmp_path / "p.sqlite"
    shutil.copy(export, path)
    with sqlite3.connect(path) as conn:
        what = _nsys_long(conn, where, "k" * n)
    conn.close()
    before = _digest(path)
    _check(kb("top", path, "--format", "json"), ok, path, what)
    assert _digest(path) == before


def test_metadata_past_the_cap_is_left_out_not_refused(export, tmp_path):
    """The export's own metadata table: a value past the cap is left out (kbase reads a few short ones)."""
    path = tmp_path / "p.sqlite"
    shutil.copy(export, path)
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO META_DATA_EXPORT VALUES ('HUGE', ?)", ("m" * (2 << 20),))
    conn.close()
    assert kb("top", path).rc == 0


# ------------------------------------------------------------------------------------------ gzip bombs

# A JSON text with one huge value where ``where`` says: (text before, text after).
BOMBS = {
    "kernel name": ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "', '", "ts": 1, "dur": 2}]}'),
    "metadata string": ('{"schemaVersion": 1, "distributedInfo": "', '", "traceEvents": []}'),
    "object key": ('{"traceEvents": [], "', '": 1}'),
    "args value": ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2, "args": {"x": "',
                   '"}}]}'),
    "number": ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1', ', "dur": 2}]}'),
    "list of a trace's events": ('[{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 2}, {"name": "',
                                 '", "ts": 1, "dur": 2}]'),
}


def gzip_bomb(path: Path, where: str, mib: int, fill: bytes = b"a") -> Path:
    """``mib`` MiB of ``fill`` inside one JSON value, gzipped as one member per MiB (written in milliseconds;
    a gzip reader joins the members into one stream)."""
    pre, post = BOMBS[where]
    one = gzip.compress(fill * (1 << 20), compresslevel=9, mtime=0)
    with open(path, "wb") as fh:
        fh.write(gzip.compress(pre.encode(), mtime=0))
        for _ in range(mib):
            fh.write(one)
        fh.write(gzip.compress(post.encode(), mtime=0))
    return path


MEASURE = """
import resource, subprocess, sys, time
t = time.monotonic()
p = subprocess.run([sys.executable, "-m", "kbase.cli", "top", sys.argv[1]], capture_output=True, text=True)
took = time.monotonic() - t
print(p.returncode, took, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, repr(p.stderr.strip()))
"""


def run_measured(path: Path) -> tuple[int, float, float, str]:
    """(exit code, seconds, peak RSS in MiB, stderr) of ``kbase top PATH`` in a child process of its own."""
    out = subprocess.run([sys.executable, "-c", MEASURE, str(path)], capture_output=True, text=True, cwd=REPO,
                         timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    rc, took, rss_kib, err = out.stdout.strip().split(" ", 3)
    return int(rc), float(took), int(rss_kib) / 1024, eval(err)  # noqa: S307 - our own repr of a str


@pytest.mark.parametrize("where", list(BOMBS))
def test_one_huge_value_is_refused_quickly_in_bounded_memory(tmp_path, where):
    fill = b"7" if where == "number" else b"a"
    path = gzip_bomb(tmp_path / "bomb.json.gz", where, 2048, fill)  # 2 GiB of text in ~2 MiB
    assert path.stat().st_size < 4 << 20
    rc, took, rss_mib, err = run_measured(path)
    assert rc == 2 and len(err.splitlines()) == 1 and str(path) in err, err
    if where == "number":  # refused sooner: Python reads no integer of over 4,300 digits
        assert "a value cannot be read" in err, err
    else:
        assert f"past {MAX_VALUE_CHARS >> 20} MiB" in err, err
    # Correctness bounds, not performance targets: the 2 GiB value is never held, nor read to its end.
    assert took < 30, took
    assert rss_mib < 500, rss_mib


def test_a_value_just_under_the_cap_is_read(tmp_path):
    """The cap is on one value, not the file: many ordinary events past 16 MiB in all are read."""
    doc = trace_doc(rank=0, world=None, steps=4)
    doc["padding"] = ["x" * 1000] * 2000  # 2 MB of metadata in one value: under the cap
    doc["traceEvents"] += [{"ph": "i", "cat": "other", "name": "p" * 1000, "ts": 1, "pid": 1, "tid": 1}] * 20_000
    path = write_trace(tmp_path / "t.json", doc)
    assert path.stat().st_size > MAX_VALUE_CHARS
    assert kb("top", path).rc == 0


def test_the_caps_are_documented_and_generous():
    """The name cap is several times the longest real name; the value cap is larger than any name."""
    assert MAX_NAME_CHARS >= 1 << 16 and MAX_VALUE_CHARS >= 64 * MAX_NAME_CHARS
    assert json.dumps({"name": "k" * MAX_NAME_CHARS}).__len__() < MAX_VALUE_CHARS
