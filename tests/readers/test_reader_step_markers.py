"""Issue 12: a rank or process without step markers is never dropped from the window silently.

An iteration window is built from step markers; a GPU whose process (nsys) or rank (Kineto) has
none would fall out of it, and the run be reported with fewer GPUs. That is exit 2 with one line
naming the GPU (process/rank and file) and why — or, with ``WindowSpec(allow_missing_ranks=True)``,
the GPU is left out, listed in ``Window.missing_gpus`` and in the notes of every output.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from kbase.analysis.leaderboard import build_leaderboard
from kbase.analysis.window import WindowSpec, select_window
from kbase.errors import InputError
from kbase.readers import read_profile
from kbase.render.leaderboard import leaderboard_json, leaderboard_md
from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase
from helpers.kineto_traces import edit, folder_state, make_run, trace_doc, write_trace


def refused(*args) -> str:
    res = run_kbase(*args)
    assert res.rc == 2, res
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res
    return lines[0]


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def nsys_without_markers_on_one_process(tmp_path_factory) -> Path:
    """Two processes (pid 1000 on GPU 0, pid 1001 on GPU 1); pid 1001 lost its NVTX ranges."""
    path = tmp_path_factory.mktemp("nsys") / "two_ranks.sqlite"
    generate_export(path, ExportSpec(n_gpus=2, iterations=5, seed=7))
    conn = sqlite3.connect(path)
    conn.execute("DELETE FROM NVTX_EVENTS WHERE ((globalTid >> 24) & 16777215) = 1001")
    conn.commit()
    conn.close()
    return path


def test_nsys_process_without_markers_is_an_error(nsys_without_markers_on_one_process):
    path = nsys_without_markers_on_one_process
    digest, before = _sha(path), folder_state(path.parent)
    line = refused("top", path, "--format", "json")
    assert str(path) in line and "pid 1001" in line and "ProfilerStep#N" in line
    assert "1 of 2 GPUs" in line and "--allow-missing-ranks" in line
    assert _sha(path) == digest and folder_state(path.parent) == before


def test_nsys_process_without_markers_allowed_is_shown_everywhere(nsys_without_markers_on_one_process):
    prof = read_profile(nsys_without_markers_on_one_process)
    assert prof.n_gpus == 2
    w = select_window(prof, WindowSpec(allow_missing_ranks=True))
    assert w.n_gpus == 1 and w.missing_gpus == [1]
    lb = build_leaderboard(w)
    for text in (json.dumps(json.loads(leaderboard_json(lb))["notes"]), leaderboard_md(lb), " ".join(w.notes)):
        assert "pid 1001" in text and "left out of the window" in text


def test_selecting_the_gpu_that_has_markers_is_not_a_loss(nsys_without_markers_on_one_process):
    w = select_window(read_profile(nsys_without_markers_on_one_process), WindowSpec(gpu=0))
    assert w.n_gpus == 1 and not w.missing_gpus
    with pytest.raises(InputError, match="pid 1001"):
        select_window(read_profile(nsys_without_markers_on_one_process), WindowSpec(gpu=1))


def test_kineto_rank_without_markers_is_an_error(tmp_path):
    run = tmp_path / "run"
    make_run(run, world=2)
    write_trace(run / "rank1.json", trace_doc(1, 2, markers=False))
    before = folder_state(run)
    line = refused("top", run)
    assert "GPU 1 (rank 1, rank1.json)" in line and "ProfilerStep#N" in line
    w = select_window(read_profile(run), WindowSpec(allow_missing_ranks=True))
    assert w.n_gpus == 1 and w.missing_gpus == [1]
    assert any("rank1.json" in n and "left out" in n for n in build_leaderboard(w).notes)
    assert folder_state(run) == before


def test_kineto_rank_whose_launches_are_not_captured(tmp_path):
    run = tmp_path / "run"
    make_run(run, world=2)

    def no_launches(doc):
        doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "cuda_runtime"]
        for e in doc["traceEvents"]:
            e.get("args", {}).pop("correlation", None)

    write_trace(run / "rank1.json", edit(trace_doc(1, 2), no_launches))
    line = refused("top", run)
    assert "rank1.json" in line and "launch call" in line


def test_iteration_kernel_missing_on_one_rank(tmp_path):
    run = tmp_path / "run"
    make_run(run, world=2)

    def rename(doc):
        for e in doc["traceEvents"]:
            if e.get("cat") == "kernel" and e["name"].startswith("void gemm"):
                e["name"] = "sgemm_other"

    write_trace(run / "rank1.json", edit(trace_doc(1, 2), rename))
    line = refused("top", run, "--iteration-kernel", "^void gemm")
    assert "rank1.json" in line and "iteration kernel '^void gemm'" in line


def test_a_gpu_of_a_process_with_markers_but_no_step_work_is_not_refused(tmp_path):
    """An init kernel on a second device, launched before the first step by a process that has
    step markers: that GPU did no step work; nothing of a rank is lost."""
    def init_kernel(doc):
        doc["traceEvents"] += [
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4000, "tid": 4001, "ts": 10,
             "dur": 5, "args": {"correlation": 999}},
            {"ph": "X", "cat": "kernel", "name": "init_kernel", "pid": 1, "tid": 7, "ts": 30, "dur": 4,
             "args": {"device": 1, "correlation": 999}},
        ]

    p = write_trace(tmp_path / "rank0.json", edit(trace_doc(0, 1), init_kernel))
    prof = read_profile(p)
    assert prof.n_gpus == 2
    w = select_window(prof, WindowSpec())
    assert w.n_gpus == 1 and not w.missing_gpus


def test_every_gpu_with_markers_reads_as_before(tmp_path):
    run = tmp_path / "run"
    make_run(run, world=3)
    w = select_window(read_profile(run), WindowSpec())
    assert w.n_gpus == 3 and not w.missing_gpus and w.notes == []


def test_a_rank_whose_steps_are_all_outside_the_selection_is_an_error(tmp_path):
    """Rank 1 captured only step 1, which the default warm-up skip leaves out: it would vanish."""
    run = tmp_path / "run"
    make_run(run, world=2, steps=5)
    write_trace(run / "rank1.json", trace_doc(1, 2, steps=1))
    line = refused("top", run)
    assert "GPU 1 (rank 1, rank1.json)" in line and "selected ones (2..5)" in line
    w = select_window(read_profile(run), WindowSpec(allow_missing_ranks=True))
    assert w.missing_gpus == [1] and any("rank1.json" in n for n in w.notes)
    # selecting the step both ranks have keeps both
    assert select_window(read_profile(run), WindowSpec(iterations="0:1")).n_gpus == 2
