"""Bad input for ``kbase top``: exit code 2, exactly one line on stderr naming the file or the value,
no traceback, nothing on stdout — and the input file is never modified."""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.shared import NSYS_DIR, SCHEMA_SOURCE, require_shared, ro_connect
from helpers.tiny_export import FALLBACK_DDL, export_ddl, make_tiny_export


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` with its hash (a journal or lock file left behind shows up)."""
    return {str(p.relative_to(folder)): sha256(p) for p in sorted(folder.rglob("*")) if p.is_file()}


# --------------------------------------------------------------------------- building bad inputs
# Each builder takes a scratch folder and returns (kbase arguments after "top", text the one error
# line must contain).


def missing_file(d: Path):
    p = d / "missing.sqlite"
    return [p], str(p)


def a_directory(d: Path):
    p = d / "emptydir"
    p.mkdir()
    return [p], str(p)


def zero_bytes(d: Path):
    p = d / "zero.sqlite"
    p.write_bytes(b"")
    return [p], str(p)


def truncated_tiny(d: Path):
    full = make_tiny_export(d / "full.sqlite", pad_rows=100)
    p = d / "truncated.sqlite"
    data = full.read_bytes()
    assert len(data) > 8192
    p.write_bytes(data[:8192])
    full.unlink()
    return [p], str(p)


def truncated_real(d: Path):
    src = require_shared("h100_2gpu_fsdp_t5.sqlite")
    p = d / "truncated_real.sqlite"
    with open(src, "rb") as fh:
        p.write_bytes(fh.read(8192))
    return [p], str(p)


def random_bytes(d: Path):
    p = d / "x.sqlite"
    p.write_bytes(random.Random(1234).randbytes(4096))
    return [p], str(p)


def plain_sqlite(d: Path):
    p = d / "notnsys.sqlite"
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE measurements (t INTEGER, value REAL)")
    conn.execute("INSERT INTO measurements VALUES (1, 2.5)")
    conn.commit()
    conn.close()
    return [p], str(p)


def empty_kernel_table(d: Path):
    p = d / "nokernels.sqlite"
    ddl = export_ddl(["StringIds", "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"])
    conn = sqlite3.connect(p)
    for sql in ddl.values():
        conn.execute(sql)
    conn.execute("INSERT INTO StringIds (id, value) VALUES (1, 'cudaLaunchKernel')")
    conn.commit()
    conn.close()
    return [p], str(p)


def no_string_ids(d: Path):
    p = make_tiny_export(d / "nostrings.sqlite", string_ids=False)
    return [p], str(p)


def no_kernel_table(d: Path):
    p = d / "cpuonly.sqlite"
    ddl = export_ddl(["StringIds", "META_DATA_EXPORT"])
    conn = sqlite3.connect(p)
    for sql in ddl.values():
        conn.execute(sql)
    conn.commit()
    conn.close()
    return [p], str(p)


def marker_without_nvtx(d: Path):
    p = make_tiny_export(d / "nonvtx.sqlite", nvtx=False)
    return [p, "--marker", "^ProfilerStep"], str(p)


def marker_matching_nothing(d: Path):
    p = make_tiny_export(d / "tiny.sqlite")
    return [p, "--marker", "^no_such_range$"], "^no_such_range$"


def marker_bad_regex(d: Path):
    p = make_tiny_export(d / "tiny.sqlite")
    return [p, "--marker", "step[0-"], "step[0-"


def iteration_kernel_matching_nothing(d: Path):
    p = make_tiny_export(d / "nonvtx.sqlite", nvtx=False)
    return [p, "--iteration-kernel", "^no_such_kernel$"], "^no_such_kernel$"


def iterations_out_of_range(d: Path):
    p = make_tiny_export(d / "tiny.sqlite", steps=4)
    return [p, "--iterations", "50:60"], "50:60"


def iterations_reversed(d: Path):
    p = make_tiny_export(d / "tiny.sqlite", steps=4)
    return [p, "--iterations", "5:2"], "5:2"


def iterations_not_a_slice(d: Path):
    p = make_tiny_export(d / "tiny.sqlite")
    return [p, "--iterations", "two"], "two"


def iterations_without_marker(d: Path):
    p = make_tiny_export(d / "nonvtx.sqlite", nvtx=False)
    return [p, "--iterations", "1:3"], "1:3"


def warmup_too_large(d: Path):
    p = make_tiny_export(d / "tiny.sqlite", steps=4)
    return [p, "--warmup", "9"], "--warmup 9"


def trim_outside_capture(d: Path):
    p = make_tiny_export(d / "tiny.sqlite")  # kernels run between 1.0 s and 1.06 s
    return [p, "--trim", "50", "60"], "50"


def trim_reversed(d: Path):
    p = make_tiny_export(d / "tiny.sqlite")
    return [p, "--trim", "1.05", "1.01"], "1.05"


def gpu_not_present(d: Path):
    p = make_tiny_export(d / "tiny.sqlite")
    return [p, "--gpu", "7"], "--gpu 7"


def unknown_format(d: Path):
    p = make_tiny_export(d / "tiny.sqlite")
    return [p, "--format", "xml"], "xml"


def limit_not_a_number(d: Path):
    p = make_tiny_export(d / "tiny.sqlite")
    return [p, "--limit", "many"], "--limit"


# The first few also run as a real child process (the exact program a user starts).
CASES = [
    ("missing-file", missing_file, True),
    ("directory", a_directory, False),
    ("zero-byte", zero_bytes, False),
    ("truncated-sqlite", truncated_tiny, True),
    ("truncated-real-export", truncated_real, False),
    ("random-bytes", random_bytes, False),
    ("sqlite-not-nsys", plain_sqlite, False),
    ("empty-kernel-table", empty_kernel_table, False),
    ("no-kernel-table", no_kernel_table, False),
    ("no-stringids", no_string_ids, False),
    ("marker-no-nvtx", marker_without_nvtx, False),
    ("marker-matches-nothing", marker_matching_nothing, False),
    ("marker-bad-regex", marker_bad_regex, False),
    ("iteration-kernel-matches-nothing", iteration_kernel_matching_nothing, False),
    ("iterations-out-of-range", iterations_out_of_range, False),
    ("iterations-reversed", iterations_reversed, False),
    ("iterations-not-a-slice", iterations_not_a_slice, False),
    ("iterations-without-marker", iterations_without_marker, False),
    ("warmup-too-large", warmup_too_large, False),
    ("trim-outside-capture", trim_outside_capture, False),
    ("trim-reversed", trim_reversed, False),
    ("gpu-not-present", gpu_not_present, False),
    ("unknown-format", unknown_format, False),
    ("limit-not-a-number", limit_not_a_number, False),
]


@pytest.mark.parametrize("build, subprocess", [pytest.param(b, s, id=i) for i, b, s in CASES])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, build, subprocess: bool) -> None:
    args, mention = build(tmp_path)
    before = snapshot(tmp_path)
    if "--format" not in args:
        args = [*args, "--format", "json"]
    res = run_kbase("top", *args, subprocess=subprocess)
    assert res.rc == 2, str(res)
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, str(res)
    lines = res.stderr.splitlines()
    assert len(lines) == 1, str(res)
    line = lines[0]
    assert line.strip(), str(res)
    assert line.startswith("kbase: error: "), str(res)
    assert mention in line, f"{mention!r} not in {line!r}"
    assert res.stdout == "", str(res)
    assert snapshot(tmp_path) == before, "the input (or its folder) changed"


@pytest.mark.slow
def test_error_cases_do_not_write_to_shared_exports(tmp_path: Path) -> None:
    """Errors found on a real export (marker, window, GPU) leave the read-only file untouched."""
    src = require_shared("h100_2gpu_fsdp_t5.sqlite")
    before = sha256(src)
    for extra, mention in (
        (["--marker", "^no_such_range$"], "^no_such_range$"),
        (["--marker", "^aten::linear", "--iterations", "500:600"], "500:600"),
        (["--gpu", "7"], "--gpu 7"),
        (["--trim", "1", "2"], "--trim"),
    ):
        res = run_kbase("top", src, *extra, "--format", "json")
        assert res.rc == 2, str(res)
        lines = res.stderr.splitlines()
        assert len(lines) == 1 and mention in lines[0], str(res)
        assert "Traceback" not in res.stderr
    assert sha256(src) == before


# --------------------------------------------------------------------------- success leaves input alone


@pytest.mark.slow
def test_successful_run_leaves_the_export_unchanged(tmp_path: Path) -> None:
    export = make_tiny_export(tmp_path / "run.sqlite")
    before = snapshot(tmp_path)
    stat = export.stat()
    res = run_kbase("top", export, "--format", "json", subprocess=True)
    assert res.rc == 0, str(res)
    assert res.stderr == "", str(res)
    doc = json.loads(res.stdout)
    s = doc["summary"]
    # the tiny export: ProfilerStep#1..#4, step 1 skipped as warm-up, 3 kernels per step
    assert s["mode"] == "iterations"
    assert s["iteration_keys"] == [2, 3, 4]
    assert s["launches"] == 9
    assert s["unattributed_no_launch"] == 1
    assert s["outside_iterations"] == 1
    assert {r["name"]: r["count"] for r in doc["kernels"]} == {
        "ampere_sgemm_128x64_nn": 3,
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)": 3,
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)": 3,
    }
    # same bytes, same mtime, and no -journal / -wal / -shm file beside it
    assert snapshot(tmp_path) == before
    assert export.stat().st_mtime_ns == stat.st_mtime_ns


def test_successful_run_on_a_shared_export_leaves_it_unchanged() -> None:
    src = require_shared("a100_mmagic_vsr.sqlite")
    before = snapshot(NSYS_DIR)
    for fmt in ("json", "csv", "md", "table"):
        res = run_kbase("top", src, "--format", fmt)
        assert res.rc == 0, str(res)
        assert res.stdout
    assert snapshot(NSYS_DIR) == before


def test_fallback_schema_uses_real_column_names() -> None:
    """The DDL used without shared data names columns exactly as real exports do."""
    require_shared()
    conn = ro_connect(SCHEMA_SOURCE)
    try:
        for table, ddl in FALLBACK_DDL.items():
            real = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
            mem = sqlite3.connect(":memory:")
            mem.execute(ddl)
            ours = {r[1] for r in mem.execute(f"PRAGMA table_info({table})")}
            mem.close()
            assert ours <= real, (table, ours - real)
    finally:
        conn.close()
