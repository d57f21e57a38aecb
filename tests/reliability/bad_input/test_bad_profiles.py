"""Issue #6, bad-input matrix: bad profiles through ``kbase snapshot`` with a store present (see
test_bad_references.py's docstring for the rules every case holds)."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from helpers.bad_input import (
    World,
    assert_bad_input,
    kb,
    kb_proc,
    store_state,
)
from helpers.tiny_export import export_ddl, make_tiny_export

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


# --------------------------------------------------------------------------- bad profiles via snapshot
# Each builder: (scratch dir, world) -> (arguments after "snapshot", strings the error line names).


def missing_path(d: Path, w: World):
    p = d / "missing.sqlite"
    return [p], [str(p), "no such file"]


def directory(d: Path, w: World):
    p = d / "adir"
    p.mkdir()
    return [p], [str(p), "directory"]


def zero_bytes(d: Path, w: World):
    p = d / "zero.sqlite"
    p.write_bytes(b"")
    return [p], [str(p), "empty"]


def truncated_sqlite(d: Path, w: World):
    full = make_tiny_export(d / "full.sqlite", pad_rows=100)
    p = d / "truncated.sqlite"
    p.write_bytes(full.read_bytes()[:8192])
    full.unlink()
    return [p], [str(p)]


def random_bytes(d: Path, w: World):
    p = d / "random.sqlite"
    p.write_bytes(random.Random(6).randbytes(4096))
    return [p], [str(p), "not a SQLite database"]


def sqlite_not_nsys(d: Path, w: World):
    p = d / "other.sqlite"
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE measurements (t INTEGER, value REAL)")
    conn.execute("INSERT INTO measurements VALUES (1, 2.5)")
    conn.commit()
    conn.close()
    return [p], [str(p), "not an Nsight Systems export"]


def empty_kernel_table(d: Path, w: World):
    p = d / "nokernels.sqlite"
    conn = sqlite3.connect(p)
    for sql in export_ddl(["StringIds", "CUPTI_ACTIVITY_KIND_KERNEL",
                           "CUPTI_ACTIVITY_KIND_RUNTIME"]).values():
        conn.execute(sql)
    conn.execute("INSERT INTO StringIds (id, value) VALUES (1, 'cudaLaunchKernel')")
    conn.commit()
    conn.close()
    return [p], [str(p), "empty"]


def no_string_ids(d: Path, w: World):
    p = make_tiny_export(d / "nostrings.sqlite", string_ids=False)
    return [p], [str(p), "StringIds"]


def marker_without_nvtx(d: Path, w: World):
    p = make_tiny_export(d / "nonvtx.sqlite", nvtx=False)
    return [p, "--marker", "^ProfilerStep"], [str(p), "^ProfilerStep", "no NVTX"]


def marker_matching_nothing(d: Path, w: World):
    return [w.tiny, "--marker", "^no_such_range$"], ["^no_such_range$", "matches no range"]


def iterations_out_of_range(d: Path, w: World):
    return [w.tiny, "--iterations", "50:60"], ["50:60"]


def iterations_reversed(d: Path, w: World):
    return [w.tiny, "--iterations", "3:1"], ["3:1"]


def trim_outside_capture(d: Path, w: World):
    return [w.tiny, "--trim", "50", "60"], ["--trim", "50"]


def gpu_not_present(d: Path, w: World):
    return [w.tiny, "--gpu", "7"], ["--gpu 7"]


def unknown_format(d: Path, w: World):
    return [w.tiny, "--format", "xml"], ["xml"]


PROFILE_CASES = [
    missing_path, directory, zero_bytes, truncated_sqlite, random_bytes, sqlite_not_nsys, empty_kernel_table,
    no_string_ids, marker_without_nvtx, marker_matching_nothing, iterations_out_of_range, iterations_reversed,
    trim_outside_capture, gpu_not_present, unknown_format,
]


@pytest.mark.parametrize("build", [pytest.param(b, id=b.__name__.replace("_", "-")) for b in PROFILE_CASES])
def test_bad_profile_snapshot_leaves_store_unchanged(build, store_url, world, tmp_path):
    args, mentions = build(tmp_path, world)
    before = store_state(store_url)
    files = sorted(p.name for p in tmp_path.iterdir())
    res = kb("snapshot", *args, "--db", store_url, "--repo", world.repo, "--name", "w")
    assert_bad_input(res, *mentions)
    assert res.stdout == ""
    assert store_state(store_url) == before, "the store changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == files, "kbase wrote beside the profile"


@pytest.mark.slow
def test_bad_profile_snapshot_as_a_process(sqlite_store, world, tmp_path):
    """The same contract from the real program (no in-process shortcuts)."""
    args, mentions = truncated_sqlite(tmp_path, world)
    before = store_state(sqlite_store)
    res = kb_proc("snapshot", *args, "--db", sqlite_store, "--repo", world.repo)
    assert_bad_input(res, *mentions)
    assert store_state(sqlite_store) == before
