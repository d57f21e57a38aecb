"""Issue 12, per-rank trace directories: nothing lost, nothing mixed in, silently.

- A rank that cannot be read (corrupt gzip header, not JSON, cut short, empty, not UTF-8, a link to
  nothing, no kernels) is exit 2 with one line naming the file and what is wrong — or, read with
  ``allow_missing_ranks``, left out and shown in the profile's notes, the window's notes and every
  rendered format.
- Traces of different runs in one directory (world sizes, jobs, profiler versions, capture times
  491 days apart) are refused; a few seconds of clock skew between ranks is not.
- One trace twice (a .json and a .json.gz of one rank, a link, a copy, a repeated argument) is
  refused; a non-trace JSON file (config.json) is left out and listed.
- The input directory is byte-identical afterwards and holds no new file.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from kbase.analysis.leaderboard import build_leaderboard
from kbase.analysis.window import WindowSpec, select_window
from kbase.errors import InputError
from kbase.readers import read_profile
from kbase.readers.kineto import read_kineto
from kbase.render.leaderboard import leaderboard_json, leaderboard_md

from helpers.cli import run_kbase
from helpers.kineto_traces import BASE_NS, edit, folder_state, make_run, make_trace, trace_doc, write_trace
from helpers.shared import KINETO_DIR, shared_present


def refused(*args) -> str:
    """Run kbase; assert exit 2 with exactly one line on stderr and no traceback; return the line."""
    res = run_kbase(*args)
    assert res.rc == 2, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res
    return lines[0]


def _damage(path: Path, kind: str) -> str:
    """Replace rank 1's trace at ``path`` by a damaged one; return a fragment the error must carry."""
    good = json.dumps(trace_doc(1, 2)).encode()
    if kind == "corrupt-gzip-header":
        path.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00garbage that is not deflate" * 4)
        return "gzip"
    if kind == "gzip-cut-short":
        blob = gzip.compress(good, mtime=0)
        path.write_bytes(blob[: len(blob) // 2])
        return "gzip"
    if kind == "not-json":
        path.write_bytes(b"rank 1 crashed before writing its trace\n")
        return "not JSON"
    if kind == "json-cut-short":
        path.write_bytes(good[: len(good) // 2])
        return "invalid JSON"
    if kind == "empty":
        path.write_bytes(b"")
        return "empty file"
    if kind == "not-utf8":
        path.write_bytes(good[:40] + b"\xff\xfe\xfd" + good[40:])
        return "UTF-8"
    if kind == "no-kernels":
        doc = edit(trace_doc(1, 2), lambda d: d.update(traceEvents=[e for e in d["traceEvents"] if e.get("cat") != "kernel"]))
        write_trace(path, doc, gz=path.name.endswith(".gz"))
        return "without GPU kernel events"
    if kind == "dangling-link":
        path.unlink()
        path.symlink_to(path.parent / "gone" / path.name)
        return "cannot read"
    raise AssertionError(kind)


DAMAGE = ["corrupt-gzip-header", "gzip-cut-short", "not-json", "json-cut-short", "empty", "not-utf8",
          "no-kernels", "dangling-link"]


@pytest.mark.parametrize("kind", DAMAGE)
def test_an_unreadable_rank_is_an_error_naming_the_file(tmp_path, kind):
    run = tmp_path / "run"
    gz = kind.startswith(("corrupt-gzip", "gzip"))
    files = make_run(run, world=2, gz=gz)
    fragment = _damage(files[1], kind)
    before = folder_state(run)
    line = refused("top", run, "--format", "json")
    assert str(files[1]) in line and fragment in line, line
    assert "--allow-missing-ranks" in line
    with pytest.raises(InputError, match="allow_missing_ranks"):
        read_profile(run)
    assert folder_state(run) == before


@pytest.mark.parametrize("kind", DAMAGE)
def test_allow_missing_ranks_reads_the_others_and_every_output_shows_the_loss(tmp_path, kind):
    run = tmp_path / "run"
    files = make_run(run, world=2, gz=kind.startswith(("corrupt-gzip", "gzip")))
    _damage(files[1], kind)
    before = folder_state(run)
    prof = read_profile(run, allow_missing_ranks=True)
    assert prof.n_gpus == 1 and [r["rank"] for r in prof.extra["ranks"]] == [0]
    assert [Path(m["file"]).name for m in prof.extra["missing_ranks"]] == [files[1].name]
    assert any(files[1].name in n and "left out" in n for n in prof.extra["notes"])
    window = select_window(prof, WindowSpec(allow_missing_ranks=True))
    lb = build_leaderboard(window)
    assert any(files[1].name in n for n in window.notes)
    assert any(files[1].name in n for n in json.loads(leaderboard_json(lb))["notes"])
    assert files[1].name in leaderboard_md(lb)
    assert folder_state(run) == before


def test_every_rank_unreadable_is_an_error_even_when_allowed(tmp_path):
    run = tmp_path / "run"
    for f in make_run(run, world=2):
        f.write_bytes(b"oops")
    with pytest.raises(InputError, match="none of its 2 rank traces can be read"):
        read_profile(run, allow_missing_ranks=True)


def test_a_single_unreadable_file_is_its_own_error(tmp_path):
    p = tmp_path / "only.json"
    p.write_bytes(b'{"traceEvents": [')
    with pytest.raises(InputError) as info:
        read_profile(p, allow_missing_ranks=True)
    assert str(info.value).startswith(str(p)) and "allow-missing-ranks" not in str(info.value)


def test_a_non_trace_json_file_is_left_out_and_listed(tmp_path):
    run = tmp_path / "run"
    make_run(run, world=2)
    (run / "config.json").write_text('{"lr": 0.1, "batch": 32}')
    (run / "notes.txt").write_text("not a trace")
    prof = read_profile(run)
    assert prof.n_gpus == 2
    assert [Path(f).name for f in prof.extra["ignored_files"]] == ["config.json"]


@pytest.mark.parametrize("content", ["{}", "[]", "null", '{"traceEvents"'])
def test_an_empty_or_broken_json_document_is_a_rank_not_a_config_file(tmp_path, content):
    run = tmp_path / "run"
    make_run(run, world=2)
    (run / "rank2.json").write_text(content)
    line = refused("top", run)
    assert "rank2.json" in line and "--allow-missing-ranks" in line


def test_a_rank_with_long_metadata_before_its_events_is_read(tmp_path):
    """Big jobs list their process groups before traceEvents: more than the 256 KiB sniffed."""
    run = tmp_path / "run"
    make_run(run, world=2)
    big = trace_doc(1, 2)
    big = {"schemaVersion": 1, "distributedInfo": dict(big["distributedInfo"], pg_config=[
        {"pg_name": str(i), "ranks": list(range(64))} for i in range(2000)])} | {
        k: v for k, v in big.items() if k not in ("schemaVersion", "distributedInfo")}
    write_trace(run / "rank1.json", big)
    assert read_profile(run).n_gpus == 2


def test_absent_ranks_of_the_declared_world_are_noted(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for r in (0, 1, 3):
        make_trace(run / f"rank{r}.json", r, 4)
    prof = read_profile(run)
    assert prof.extra["absent_ranks"] == [2]
    assert any("ranks 2 of a world of 4" in n for n in prof.extra["notes"])
    assert any("ranks 2 of a world of 4" in n for n in select_window(prof, WindowSpec()).notes)


# --------------------------------------------------------------------------------------------
# different runs


def _two(run: Path, doc0: dict, doc1: dict) -> Path:
    run.mkdir()
    write_trace(run / "rank0.json", doc0)
    write_trace(run / "rank1.json", doc1)
    return run


DAY_NS = 86_400 * 10**9
DIFFERENT_RUNS = {
    "world-sizes": (trace_doc(0, 2), trace_doc(1, 4), "world size 2 in rank0.json, 4 in rank1.json"),
    "rank-outside-world": (trace_doc(0, 2), trace_doc(3, 2), "rank1.json is rank 3 of a world of 2"),
    "distributed-and-not": (trace_doc(0, 2), trace_doc(1, None), "has no distributedInfo"),
    "jobs": (trace_doc(0, 2, job="train-a"), trace_doc(1, 2, job="train-b"), "different jobs (tw_job"),
    "process-groups": (edit(trace_doc(0, 2), lambda d: d["distributedInfo"].update(nccl_version="2.17.1")),
                       edit(trace_doc(1, 2), lambda d: d["distributedInfo"].update(nccl_version="2.21.5")),
                       "distributedInfo.nccl_version"),
    "profiler-versions": (trace_doc(0, 2), edit(trace_doc(1, 2), lambda d: d.update(schemaVersion=2)),
                          "different profiler versions"),
    "491-days-apart": (trace_doc(0, 2), trace_doc(1, 2, base_ns=BASE_NS + 491 * DAY_NS), "491.0 days apart"),
    "relative-and-absolute-clock": (trace_doc(0, 2), trace_doc(1, 2, base_ns=None), "apart"),
}


@pytest.mark.parametrize("case", list(DIFFERENT_RUNS))
def test_traces_of_different_runs_are_refused(tmp_path, case):
    doc0, doc1, fragment = DIFFERENT_RUNS[case]
    run = _two(tmp_path / "run", doc0, doc1)
    before = folder_state(run)
    line = refused("top", run)
    assert line.startswith(f"kbase: error: {run}") or str(run) in line
    assert fragment in line, line
    # no allowance makes them one run
    with pytest.raises(InputError, match="run|apart|versions"):
        read_profile(run, allow_missing_ranks=True)
    assert folder_state(run) == before


def test_clock_skew_between_ranks_of_one_run_is_accepted(tmp_path):
    run = _two(tmp_path / "run", trace_doc(0, 2), trace_doc(1, 2, base_ns=BASE_NS + 30 * 10**9))
    assert read_profile(run).n_gpus == 2


@pytest.mark.slow
def test_real_traces_of_two_runs_are_refused(tmp_path):
    """The 491-day window of the issue: two HTA sample traces (world sizes 1 and 2) in one folder."""
    names = ("v100_ns_resolution.pt.trace.json.gz", "v100_df_index_resolver.json.gz")
    if not shared_present() or not all((KINETO_DIR / n).is_file() for n in names):
        pytest.skip("../shared/data/kineto not present: real-trace case skipped")
    run = tmp_path / "run"
    run.mkdir()
    for n in names:
        shutil.copyfile(KINETO_DIR / n, run / n)
    line = refused("top", run)
    assert "traces of different runs" in line and "world size 1" in line and "2 in" in line


# --------------------------------------------------------------------------------------------
# one trace twice


def test_json_and_json_gz_of_one_rank_are_refused(tmp_path):
    run = tmp_path / "run"
    files = make_run(run, world=2)
    write_trace(run / "rank1.json.gz", trace_doc(1, 2), gz=True)
    line = refused("top", run)
    assert "rank1.json" in line and "keep one" in line and str(files[1].parent) in line


def test_a_link_to_another_rank_is_refused(tmp_path):
    run = tmp_path / "run"
    files = make_run(run, world=2)
    (run / "rank2.json").symlink_to(files[0])
    line = refused("top", run)
    assert "the same file as" in line


def test_a_copy_under_another_name_is_refused(tmp_path):
    # 2021-style traces declare no rank: only their content shows the copy
    run = tmp_path / "run"
    run.mkdir()
    doc = trace_doc(0, None)
    write_trace(run / "a.json", doc)
    write_trace(run / "b.json.gz", doc, gz=True)
    line = refused("top", run)
    assert "the same trace as" in line and "copy" in line


def test_a_file_given_twice_is_refused(tmp_path):
    a = make_trace(tmp_path / "r0.json", 0, 2)
    with pytest.raises(InputError, match="same file"):
        read_kineto([a, a])
    with pytest.raises(InputError, match="same file"):
        read_kineto([a, tmp_path / "." / "r0.json"])


def test_unreadable_rank_by_permissions(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("running as root: file modes do not stop reads")
    run = tmp_path / "run"
    files = make_run(run, world=2)
    files[1].chmod(0)
    try:
        line = refused("top", run)
        assert str(files[1]) in line and "ermission" in line
    finally:
        files[1].chmod(0o644)
