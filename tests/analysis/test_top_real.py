"""``kbase top`` on the real Nsight Systems exports in ../shared/data, checked against plain SQL.

Every expected number here is computed by the test itself from the export with sqlite3 (never by
kbase code), so a reader, window or aggregation bug shows as a mismatch.
"""

from __future__ import annotations

import csv
import functools
import io
import json
from collections import Counter
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.shared import export_params, require_shared, ro_connect

H100 = "h100_2gpu_fsdp_t5.sqlite"

GROUP_SQL = (
    "SELECT s.value, count(*), sum(k.end - k.start), min(k.end - k.start), max(k.end - k.start) "
    "FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName "
    "{where} GROUP BY s.value"
)


def sql_groups(path: Path, where: str = "", params: tuple = ()) -> dict[str, tuple[int, int, int, int]]:
    conn = ro_connect(path)
    try:
        rows = conn.execute(GROUP_SQL.format(where=where), params).fetchall()
    finally:
        conn.close()
    return {name: (int(c), int(t), int(lo), int(hi)) for name, c, t, lo, hi in rows}


def sql_starts(path: Path) -> list[int]:
    conn = ro_connect(path)
    try:
        return sorted(int(r[0]) for r in conn.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL"))
    finally:
        conn.close()


def seconds(ns: int) -> str:
    """Exact decimal seconds for an integer ns timestamp (no float formatting drift)."""
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 10**9}.{ns % 10**9:09d}"


def top_json(*args, subprocess: bool | None = None) -> dict:
    res = run_kbase("top", *args, "--format", "json", subprocess=subprocess)
    assert res.rc == 0, str(res)
    assert "Traceback" not in res.stderr
    return json.loads(res.stdout)


def by_name(doc: dict) -> dict[str, dict]:
    rows = doc["kernels"]
    names = [r["name"] for r in rows]
    assert len(names) == len(set(names)), "one row per kernel name in the aggregated view"
    return {r["name"]: r for r in rows}


def assert_matches_sql(doc: dict, expected: dict[str, tuple[int, int, int, int]]) -> None:
    got = by_name(doc)
    assert set(got) == set(expected)
    for name, (count, total, lo, hi) in expected.items():
        row = got[name]
        assert (row["count"], row["total_ns"], row["min_ns"], row["max_ns"]) == (count, total, lo, hi), name
    s = doc["summary"]
    assert s["total_kernel_ns"] == sum(v[1] for v in expected.values())
    assert s["launches"] == sum(v[0] for v in expected.values())
    assert s["kernels"] == len(expected)
    assert sum(r["share_kernel"] for r in doc["kernels"]) == pytest.approx(1.0, abs=1e-9)
    assert doc["truncated"] is False and doc["omitted"] == 0
    totals = [r["total_ns"] for r in doc["kernels"]]
    assert totals == sorted(totals, reverse=True), "leaderboard sorted by total time"


# --------------------------------------------------------------------------- 1. whole capture + trim


@pytest.mark.parametrize("export", export_params())
def test_whole_capture_matches_sql(export: Path) -> None:
    starts = sql_starts(export)
    lo, hi = starts[0] - 1, starts[-1] + 1
    # One export through a real child process (the exact command a user types); the others in
    # process to keep the suite fast (KBASE_TEST_SUBPROCESS=1 runs them all as child processes).
    doc = top_json(export, "--trim", seconds(lo), seconds(hi), "--limit", "0", subprocess=export.name == H100)
    s = doc["summary"]
    assert s["mode"] == "trim" and s["aligned"] is False
    assert (s["window_start_ns"], s["window_end_ns"]) == (lo, hi)
    expected = sql_groups(export)
    assert sum(v[0] for v in expected.values()) == len(starts), "every kernel has a name in StringIds"
    assert_matches_sql(doc, expected)


@pytest.mark.parametrize("export", export_params())
def test_default_window_of_unmarked_exports_is_whole_capture(export: Path) -> None:
    """The shared exports have no step marker: the default window is the whole capture."""
    doc = top_json(export, "--limit", "0")
    if doc["summary"]["mode"] == "iterations":
        pytest.skip(f"{export.name} has a step marker: its default window is iteration-aligned")
    assert doc["summary"]["mode"] == "whole"
    assert doc["summary"]["aligned"] is False
    assert_matches_sql(doc, sql_groups(export))


@pytest.mark.parametrize("export", export_params())
def test_trim_middle_third_matches_sql(export: Path) -> None:
    starts = sql_starts(export)
    n = len(starts)
    # Window edges on kernel starts: the kernel starting at START is in, the one at END is out.
    lo, hi = starts[n // 3], starts[(2 * n) // 3]
    if hi <= lo:
        hi = lo + 1
    doc = top_json(export, "--trim", seconds(lo), seconds(hi), "--limit", "0")
    s = doc["summary"]
    assert s["mode"] == "trim"
    assert (s["window_start_ns"], s["window_end_ns"]) == (lo, hi)
    assert s["window_ns"] == hi - lo
    expected = sql_groups(export, "WHERE k.start >= ? AND k.start < ?", (lo, hi))
    assert expected, "the middle third holds kernels"
    assert_matches_sql(doc, expected)
    inside = sum(1 for t in starts if lo <= t < hi)
    assert s["launches"] == inside
    assert inside < n


# --------------------------------------------------------------------------- 2. NVTX marker attribution


@functools.cache
def sql_linear_ranges(path: Path):
    """(pid, ordinal within pid) -> kernels launched inside that aten::linear range, plus facts."""
    conn = ro_connect(path)
    try:
        per_range = conn.execute(
            """
            WITH r AS (
                SELECT start, end, globalTid,
                       (globalTid >> 24) & 0xFFFFFF AS pid,
                       row_number() OVER (PARTITION BY (globalTid >> 24) & 0xFFFFFF ORDER BY start) - 1 AS ord
                FROM NVTX_EVENTS
                WHERE eventType = 59 AND text LIKE 'aten::linear%' AND end IS NOT NULL
            ),
            kr AS (
                SELECT k.rowid AS kid, rt.globalTid AS tid, rt.start AS launch
                FROM CUPTI_ACTIVITY_KIND_KERNEL k
                JOIN CUPTI_ACTIVITY_KIND_RUNTIME rt
                  ON rt.correlationId = k.correlationId
                 AND ((rt.globalTid >> 24) & 0xFFFFFF) = ((k.globalPid >> 24) & 0xFFFFFF)
            )
            SELECT r.pid, r.ord, count(kr.kid)
            FROM r LEFT JOIN kr ON kr.tid = r.globalTid AND kr.launch >= r.start AND kr.launch < r.end
            GROUP BY r.pid, r.ord
            """
        ).fetchall()
        no_launch = conn.execute(
            """
            SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k
            LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME rt
              ON rt.correlationId = k.correlationId
             AND ((rt.globalTid >> 24) & 0xFFFFFF) = ((k.globalPid >> 24) & 0xFFFFFF)
            WHERE rt.start IS NULL
            """
        ).fetchone()[0]
    finally:
        conn.close()
    counts = {(int(p), int(o)): int(c) for p, o, c in per_range}
    return counts, int(no_launch)


def test_aten_linear_marker_attribution_matches_sql() -> None:
    from kbase.analysis.iterations import attribute
    from kbase.readers import read_profile

    path = require_shared(H100)
    expected, no_launch = sql_linear_ranges(path)
    assert len(expected) == 280
    assert {p for p, _ in expected} == {111, 112}
    assert sum(expected.values()) == 244
    assert no_launch == 1810

    prof = read_profile(path)
    it = attribute(prof, marker="^aten::linear")
    assert it.mode == "marker"
    assert it.no_launch == no_launch
    assert len(it.ranges) == 280
    # op ids are not step numbers: keys are the ordinal of the range within its process
    assert it.keys == list(range(140))
    attributed = it.kernel_iteration >= 0
    assert int(attributed.sum()) == 244
    kernel_pid = prof.gpus["pid"].to_numpy()[prof.kernels["gpu"].to_numpy()]
    got = Counter(zip(kernel_pid[attributed].tolist(), it.kernel_iteration[attributed].tolist()))
    for key, n in expected.items():
        assert got.get(key, 0) == n, key
    assert set(got) <= set(expected)
    # launched outside every range = has a launch call but no enclosing aten::linear range
    assert it.outside == len(prof.kernels) - no_launch - 244


def test_aten_linear_marker_window_via_cli() -> None:
    """The CLI's default iteration window skips the first (warm-up) range of each process."""
    path = require_shared(H100)
    expected, no_launch = sql_linear_ranges(path)
    doc = top_json(path, "--marker", "^aten::linear", "--limit", "0")
    s = doc["summary"]
    assert s["mode"] == "iterations" and s["aligned"] is True
    assert s["iteration_keys"] == list(range(1, 140))
    assert s["warmup_skipped"] == 1
    assert s["launches"] == sum(n for (_, o), n in expected.items() if o >= 1)
    assert s["unattributed_no_launch"] == no_launch
    doc_all = top_json(path, "--marker", "^aten::linear", "--iterations", "0:", "--limit", "0")
    assert doc_all["summary"]["launches"] == 244
    assert doc_all["summary"]["iterations"] == 140


# --------------------------------------------------------------------------- 4. per GPU


def sql_gpu_pairs(path: Path) -> list[tuple[int, int]]:
    """(pid, deviceId) pairs in kbase's GPU-index order (sorted by process, then device)."""
    conn = ro_connect(path)
    try:
        return [
            (int(p), int(d)) for p, d in conn.execute(
                "SELECT DISTINCT (globalPid >> 24) & 0xFFFFFF, deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL "
                "ORDER BY 1, 2"
            )
        ]
    finally:
        conn.close()


def test_per_gpu_sums_to_aggregate() -> None:
    path = require_shared(H100)
    agg = by_name(top_json(path, "--limit", "0"))
    per = top_json(path, "--per-gpu", "--limit", "0")
    pairs = sql_gpu_pairs(path)
    assert len(pairs) == 2
    counts: Counter = Counter()
    totals: Counter = Counter()
    seen = set()
    for row in per["kernels"]:
        assert row["gpu"] in (0, 1)
        assert (row["gpu"], row["name"]) not in seen
        seen.add((row["gpu"], row["name"]))
        counts[row["name"]] += row["count"]
        totals[row["name"]] += row["total_ns"]
        assert row["gpus"] == 1
    assert set(counts) == set(agg)
    for name, row in agg.items():
        assert counts[name] == row["count"], name
        assert totals[name] == row["total_ns"], name
    # and each GPU's rows against SQL
    for gpu, (pid, dev) in enumerate(pairs):
        expected = sql_groups(path, "WHERE k.deviceId = ? AND ((k.globalPid >> 24) & 0xFFFFFF) = ?",
                              (dev, pid))
        got = {r["name"]: r for r in per["kernels"] if r["gpu"] == gpu}
        assert set(got) == set(expected)
        for name, (c, t, lo, hi) in expected.items():
            assert ((got[name]["count"], got[name]["total_ns"], got[name]["min_ns"], got[name]["max_ns"])
                    == (c, t, lo, hi))


def test_gpu_filter_matches_sql() -> None:
    path = require_shared(H100)
    pid, dev = sql_gpu_pairs(path)[1]
    doc = top_json(path, "--gpu", "1", "--limit", "0")
    expected = sql_groups(path, "WHERE k.deviceId = ? AND ((k.globalPid >> 24) & 0xFFFFFF) = ?", (dev, pid))
    assert_matches_sql(doc, expected)
    assert doc["summary"]["gpus"] == 1
    everything = sql_groups(path)
    assert sum(v[0] for v in expected.values()) < sum(v[0] for v in everything.values())


# --------------------------------------------------------------------------- 5. output formats


def test_csv_has_the_same_rows_as_json() -> None:
    path = require_shared(H100)
    doc = top_json(path, "--limit", "0")
    res = run_kbase("top", path, "--format", "csv", "--limit", "0")
    assert res.rc == 0, str(res)
    rows = list(csv.DictReader(io.StringIO(res.stdout)))
    assert len(rows) == len(doc["kernels"])
    assert list(rows[0].keys()) == list(doc["kernels"][0].keys())
    for c, j in zip(rows, doc["kernels"]):
        for key, value in j.items():
            if value is None:
                assert c[key] == "", key
            elif isinstance(value, bool):
                assert c[key] == str(value), key
            elif isinstance(value, int):
                assert int(c[key]) == value, key
            elif isinstance(value, float):
                assert float(c[key]) == pytest.approx(value, rel=1e-12, abs=1e-12), key
            else:
                assert c[key] == value, key


def test_md_contains_a_table() -> None:
    path = require_shared(H100)
    n_names = len(sql_groups(path))
    res = run_kbase("top", path, "--format", "md")
    assert res.rc == 0, str(res)
    lines = res.stdout.splitlines()
    header = [i for i, line in enumerate(lines) if line.startswith("| # | Kernel |")]
    assert len(header) == 1
    h = header[0]
    assert lines[h + 1].startswith("|---|")
    n_cols = lines[h].count("|")
    body = []
    for line in lines[h + 2:]:
        if not line.startswith("| "):
            break
        body.append(line)
    assert len(body) == min(20, n_names)  # md default limit: 20 rows
    for i, line in enumerate(body, 1):
        assert line.startswith(f"| {i} | ")
        assert line.replace("\\|", "").count("|") == n_cols
    assert f"{n_names - 20} more kernel(s) not shown" in res.stdout


def test_limit_truncates_json() -> None:
    path = require_shared(H100)
    full = top_json(path, "--limit", "0")
    doc = top_json(path, "--limit", "3")
    total = len(full["kernels"])
    assert total > 3
    assert doc["truncated"] is True
    assert doc["omitted"] == total - 3
    assert [r["name"] for r in doc["kernels"]] == [r["name"] for r in full["kernels"][:3]]
    # the summary still covers every kernel, not just the rows shown
    assert doc["summary"]["kernels"] == total
    assert doc["summary"]["total_kernel_ns"] == full["summary"]["total_kernel_ns"]
