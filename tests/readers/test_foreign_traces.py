"""A trace-event file another profiler wrote is refused naming that format, not as a CPU-only PyTorch capture."""

from __future__ import annotations

import gzip
import json

import pytest

from helpers.cli import run_kbase

TF_TRACE = {  # the TensorFlow / JAX profiler's trace viewer: process names of devices and hosts, no categories
    "displayTimeUnit": "ns", "metadata": {"highres-ticks": True},
    "traceEvents": [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:GPU:0 (Tesla V100)"}},
        {"ph": "M", "pid": 1, "tid": 2, "name": "thread_name", "args": {"name": "Stream #14(Compute)"}},
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "X", "pid": 1, "tid": 2, "ts": 10.5, "dur": 3.25, "name": "volta_sgemm_128x64_nn"},
        {"ph": "X", "pid": 2, "tid": 7, "ts": 9.0, "dur": 9.0, "name": "MatMul"},
    ],
}
CHROME_TRACE = {"traceEvents": [{"ph": "X", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "name": "frame", "cat": "blink"}]}
CPU_ONLY = {"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 1, "dur": 2, "name": "aten::add"}]}


@pytest.mark.parametrize("doc, said", [
    (TF_TRACE, "a TensorFlow/JAX profiler trace (trace-viewer format), not a PyTorch profiler trace"),
    (CHROME_TRACE, "a Chrome trace-event file not written by the PyTorch profiler"),
    (CPU_ONLY, "PyTorch profiler trace without GPU kernel events (CPU-only capture?)"),
])
def test_a_foreign_trace_is_named_in_its_refusal(tmp_path, doc, said):
    path = tmp_path / "trace.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    before = path.read_bytes()
    res = run_kbase("top", path)
    assert res.rc == 2 and said in res.stderr and "Traceback" not in res.stderr, res
    assert len(res.stderr.strip().splitlines()) == 1, res
    assert path.read_bytes() == before
