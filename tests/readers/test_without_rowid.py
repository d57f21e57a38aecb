"""Issue 29, class 7: an export whose tables are ``WITHOUT ROWID`` (rows keyed by a primary key, no rowid) is
read, not refused as damaged: every table the reader touches, alone or all at once, ``STRICT`` too, small
(sqlite3) and large (ADBC, where a rowid table would be read in rowid ranges on several threads). The
leaderboard equals the one of the same rows in ordinary tables, and the reader still never writes."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import kb

K, R, S = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "StringIds"
# A primary key for each table (unique in the generator's rows); the table is rebuilt WITHOUT ROWID around it.
KEYS = {
    K: "globalPid, deviceId, streamId, start, correlationId", R: "globalTid, start, correlationId", S: "id",
    "NVTX_EVENTS": "globalTid, start, eventType, text", "CUPTI_ACTIVITY_KIND_MEMCPY": "globalPid, start, correlationId",
    "TARGET_INFO_GPU": "vmId, id", "META_DATA_EXPORT": "name", "TARGET_INFO_CUDA_STREAM": "streamId, processId",
}
VARIANTS = {**{t: [t] for t in KEYS}, "kernel, runtime and strings": [K, R, S], "every table": list(KEYS)}


def without_rowid(src: Path, dst: Path, tables: list[str], strict: bool = False) -> Path:
    """A copy of ``src`` with ``tables`` rebuilt as WITHOUT ROWID tables (``strict``: STRICT too, which the
    generator's INTEGER/TEXT/REAL columns allow) holding the same rows."""
    shutil.copy(src, dst)
    conn = sqlite3.connect(dst)
    for t in tables:
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (t,)).fetchone()[0]
        body = sql[sql.index("(") + 1 : sql.rindex(")")].replace("PRIMARY KEY", "")
        conn.execute(f"ALTER TABLE {t} RENAME TO old_{t}")
        options = "WITHOUT ROWID, STRICT" if strict else "WITHOUT ROWID"
        conn.execute(f"CREATE TABLE {t} ({body}, PRIMARY KEY ({KEYS[t]})) {options}")
        conn.execute(f"INSERT INTO {t} SELECT * FROM old_{t}")
        conn.execute(f"DROP TABLE old_{t}")
    conn.commit()
    conn.execute("VACUUM")
    conn.close()
    return dst


@pytest.fixture(scope="module", params=[("small", 1, 3), ("large", 2, 45)], ids=["small", "large"])
def base(request, tmp_path_factory) -> tuple[Path, dict]:
    """(export, its leaderboard as JSON): small reads through sqlite3, large (> 131,072 kernel rows) through ADBC."""
    _, gpus, iterations = request.param
    d = tmp_path_factory.mktemp("wr")
    p = generate_export(d / "base.sqlite", ExportSpec(n_gpus=gpus, iterations=iterations, seed=5)).path
    r = kb("top", p, "--format", "json", "--limit", "0")
    assert r.rc == 0, r
    return p, json.loads(r.stdout)


def _board(doc: dict) -> tuple:
    summary = {k: v for k, v in doc["summary"].items() if k != "source"}
    return summary, sorted(json.dumps(k, sort_keys=True) for k in doc["kernels"]), doc["notes"]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_without_rowid_tables_are_read(base, tmp_path, variant):
    src, expected = base
    path = without_rowid(src, tmp_path / "wr.sqlite", VARIANTS[variant])
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    r = kb("top", path, "--format", "json", "--limit", "0")
    assert r.rc == 0, r
    assert _board(json.loads(r.stdout)) == _board(expected)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["wr.sqlite"]  # no journal, -wal or -shm beside it


def test_strict_without_rowid_tables_are_read(base, tmp_path):
    src, expected = base
    path = without_rowid(src, tmp_path / "wr.sqlite", [K, R, S], strict=True)
    r = kb("top", path, "--format", "json", "--limit", "0")
    assert r.rc == 0, r
    assert _board(json.loads(r.stdout)) == _board(expected)


def test_the_reader_api_reads_them_through_every_path(base, tmp_path):
    """The profile's kernel columns equal the ordinary export's once put in one order (rows of a WITHOUT
    ROWID table come in key order)."""
    import numpy as np

    from kbase import read

    src, _ = base
    a, b = read(src), read(without_rowid(src, tmp_path / "wr.sqlite", list(KEYS)))

    def rows(p) -> list:
        c = p.columns
        return sorted(zip(c.start.tolist(), c.end.tolist(), c.gpu.tolist(), np.asarray(c.names)[c.name].tolist()))

    assert rows(a) == rows(b)
