"""Whether a capture spans its whole program (``analysis.span``), decided from what the export holds: the capture's
settings and session (nsys), the profiler's span and schedule (Kineto), and the window's own launches."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from kbase.analysis.leaderboard import build_leaderboard
from kbase.analysis.span import PROGRAM, RANGE, SLICE
from kbase.analysis.window import WindowSpec, select_window
from kbase.readers import read_profile
from kbase.synth.fixed_work import FixedKernel, FixedWorkSpec, generate_fixed_work

from helpers.kineto_traces import make_trace

KERNELS = [FixedKernel("void stencil_kernel<float>(float const*, float*, int)", "stencil_kernel", 200, 250_000),
           FixedKernel("void init_kernel(int*, int)", "init_kernel", 100, 20_000)]


def _span(path: Path, spec: WindowSpec | None = None) -> tuple[str | None, str]:
    summary = build_leaderboard(select_window(read_profile(path), spec or WindowSpec())).summary
    return summary.capture_span, summary.capture_span_why or ""


def _gen(tmp_path: Path, name: str = "x.sqlite", **kw) -> Path:
    return generate_fixed_work(tmp_path / name, FixedWorkSpec(KERNELS, seed=1, **kw), overwrite=True)


def test_a_capture_from_the_programs_start_to_its_exit_spans_it(tmp_path):
    kind, why = _span(_gen(tmp_path))
    assert kind == PROGRAM
    assert "200.000 ms before the first launch" in why and "50.000 ms after the last kernel" in why


def test_a_capture_cut_by_a_clock_is_a_slice(tmp_path):
    kind, why = _span(_gen(tmp_path, slice_ns=20_000_000))  # --delay and --duration around the run's middle
    assert kind == SLICE and "into the program (a start delay)" in why, why
    path = _gen(tmp_path, "stopped.sqlite")
    con = sqlite3.connect(path)  # stopped while the GPU still ran the last kernels
    con.execute("UPDATE ANALYSIS_DETAILS SET stopTime = stopTime - 60000000, duration = duration - 60000000")
    con.commit()
    con.close()
    kind, why = _span(path)
    assert kind == SLICE and "kernels run past the session's stop" in why, why


def test_a_range_the_program_marks_is_a_range(tmp_path):
    kind, why = _span(_gen(tmp_path, capture="range"))
    assert kind == RANGE and "marks its capture range (trigger CudaProfilerApi)" in why, why


@pytest.mark.parametrize(("kw", "said"), [
    ({"host_lead_ns": 2_000_000}, "after the capture began: too close to tell whether it began with the program"),
    ({"host_tail_ns": 1_000_000}, "before the capture stopped: too close to tell whether the program had finished"),
], ids=["first-launch-at-the-start", "last-kernel-at-the-stop"])
def test_activity_at_an_edge_of_the_session_is_unknown(tmp_path, kw, said):
    """A C program can exit a few ms after its last kernel: too close is not called a slice, only not a program."""
    kind, why = _span(_gen(tmp_path, **kw))
    assert kind is None and said in why, why


def test_a_trim_window_is_a_slice_whatever_the_capture(tmp_path):
    kind, why = _span(_gen(tmp_path), WindowSpec(trim=(1.70, 1.74)))
    assert kind == SLICE and "--trim" in why


def test_a_program_that_calls_cuda_profiler_start_marks_a_range(tmp_path):
    """The trigger may say Immediate (nsys ignored the range): the call itself says the program marks one."""
    path = _gen(tmp_path)
    con = sqlite3.connect(path)
    con.execute("INSERT INTO StringIds VALUES (999, 'cudaProfilerStop_v4000')")
    con.commit()
    con.close()
    kind, why = _span(path)
    assert kind == RANGE and "cudaProfilerStart/Stop" in why


def test_an_export_cut_from_a_longer_one_is_a_slice(tmp_path):
    """Launch calls lost at the cut (the shared 2-GPU FSDP fixture lost half of them) betray it, however the
    session reads."""
    path = _gen(tmp_path)
    con = sqlite3.connect(path)
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE rowid IN "
                "(SELECT rowid FROM CUPTI_ACTIVITY_KIND_RUNTIME ORDER BY start LIMIT 3)")
    con.commit()
    con.close()
    kind, why = _span(path)
    assert kind == SLICE and why.startswith("3 kernel(s) have no launch call")


def test_an_export_that_does_not_say_is_unknown_not_a_guess(tmp_path):
    kind, why = _span(_gen(tmp_path, capture="none"))
    assert kind is None and "no capture session" in why
    path = _gen(tmp_path, "moved.sqlite")
    con = sqlite3.connect(path)  # a session that does not hold the kernels (another clock)
    con.execute("UPDATE ANALYSIS_DETAILS SET startTime = 10000000000, stopTime = 10001000000, duration = 1000000")
    con.commit()
    con.close()
    kind, why = _span(path)
    assert kind is None and "no session that holds its kernels" in why


def test_the_span_is_read_without_changing_the_export(tmp_path):
    path = _gen(tmp_path)
    copy = tmp_path / "copy.sqlite"
    shutil.copyfile(path, copy)
    _span(copy)
    assert copy.read_bytes() == path.read_bytes()


def test_a_kineto_trace_without_a_schedule_spans_the_profiled_code(tmp_path):
    kind, why = _span(make_trace(tmp_path / "plain.json", world=None, markers=False))
    assert kind == PROGRAM and "without a schedule" in why
    kind, why = _span(make_trace(tmp_path / "steps.json", world=None, markers=True))
    assert kind == RANGE and "ProfilerStep" in why


def test_settings_a_hostile_export_holds_are_inert_data(tmp_path):
    """A trigger that is no word (bytes, markup), a delay that is no number, a session of text: read as data, never
    echoed raw, never a crash."""
    path = _gen(tmp_path)
    con = sqlite3.connect(path)
    con.execute("UPDATE META_DATA_CAPTURE SET value = '<script>x</script>' || hex(zeroblob(5000)) "
                "WHERE name = 'START_TRIGGER'")
    con.execute("UPDATE META_DATA_CAPTURE SET value = '1e9' WHERE name = 'START_DELAY_MS'")
    con.executemany("INSERT INTO ANALYSIS_DETAILS VALUES (1, ?, ?, ?)", [("a", "b", "c")] * 100)
    con.commit()
    con.close()
    kind, why = _span(path)
    assert kind == SLICE and why == "the capture began on a trigger (other), not with the program"
