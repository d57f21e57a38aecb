"""kbase.readers.kineto on small synthetic traces written here (run in a fresh clone too): both trace
generations, multi-rank file order, bad and truncated inputs, exact nanoseconds, chunk boundaries, short
kernel names. The real traces are in ``test_read_kineto.py``."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from kbase.analysis.names import short_name as short_kernel_name
from kbase.errors import InputError
from kbase.readers import kineto_json
from kbase.readers.kineto import _ns, looks_like_kineto, read_kineto

from helpers.kineto_traces import attribute_steps

OLD_FORMAT = """[
  {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 100, "tid": "3000000001",
   "ts": 1000, "dur": 500, "args": {"External id": 1}},
  {"ph": "X", "cat": "Operator", "name": "aten::mm", "pid": 100, "tid": "3000000001",
   "ts": 1010, "dur": 40, "args": {"External id": 2}},
  {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": "3000000001",
   "ts": 1020, "dur": 5, "args": {"cbid": 211, "correlation": 11, "external id": 2}},
  {"ph": "s", "id": 11, "pid": 100, "tid": 3000000001, "ts": 1020, "cat": "async", "name": "launch"},
  {"ph": "X", "cat": "Kernel", "name": "void ns::gemm<float, 4>(float*, int)", "pid": 0, "tid": "stream 7",
   "ts": 1100, "dur": 30, "args": {"device": 0, "stream": 7, "correlation": 11}},
  {"ph": "f", "id": 11, "pid": 0, "tid": "stream 7", "ts": 1100, "cat": "async", "name": "launch", "bp": "e"},
  {"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": "3000000001",
   "ts": 1200, "dur": 5, "args": {"cbid": 211}},
  {"ph": "s", "id": 12, "pid": 100, "tid": 3000000001, "ts": 1200, "cat": "async", "name": "launch"},
  {"ph": "X", "cat": "Kernel", "name": "relu_kernel", "pid": 0, "tid": "stream 7",
   "ts": 1300, "dur": 7, "args": {"device": 0, "stream": 7}},
  {"ph": "f", "id": 12, "pid": 0, "tid": "stream 7", "ts": 1300, "cat": "async", "name": "launch", "bp": "e"},
  {"ph": "X", "cat": "Kernel", "name": "relu_kernel", "pid": 0, "tid": "stream 7",
   "ts": 900, "dur": 3, "args": {"device": 0, "stream": 7, "correlation": 5}},
  {"ph": "X", "cat": "Operator", "name": "ProfilerStep#2", "pid": 100, "tid": "3000000001",
   "ts": 1500, "dur": 400, "args": {}},
  {"name": "thread_name", "ph": "M", "ts": 0, "pid": 100, "tid": "3000000001", "args": {"name": "main"}},
  {"ph": "X", "cat": "Trace", "ts": 800, "dur": 2000, "pid": "Traces", "tid": "PyTorch Profiler",
   "name": "PyTorch Profiler (0)", "args": {"Op count": 0}}
]
"""

NEW_FORMAT = """
{
  "schemaVersion": 1,
  "deviceProperties": [{"id": 0, "name": "Fake GPU A"}, {"id": 1, "name": "Fake GPU B"}],
  "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},
  "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#7", "pid": 42, "tid": 43,
   "ts": 1234567.891, "dur": 100.5, "args": {}},
  {"ph": "X", "cat": "user_annotation", "name": "## forward ##", "pid": 42, "tid": 43,
   "ts": 1234568.0, "dur": 50, "args": {}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 42, "tid": 43,
   "ts": 1234568.5, "dur": 10.25, "args": {}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 42, "tid": 43,
   "ts": 1234569.001, "dur": 2.002, "args": {"correlation": 77}},
  {"ph": "X", "cat": "cuda_driver", "name": "cuLaunchKernel", "pid": 42, "tid": -5,
   "ts": 1234570.5, "dur": 1, "args": {"correlation": 78}},
  {"ph": "X", "cat": "kernel", "name": "void at::native::(anonymous namespace)::k1<int>(int)",
   "pid": 0, "tid": 7,
   "ts": 1234600.123, "dur": 12.345, "args": {"device": 0, "correlation": 77}},
  {"ph": "X", "cat": "kernel", "name": "k2", "pid": 1, "tid": 9,
   "ts": 1234700.999, "dur": 0.001, "args": {"device": 1, "correlation": 78}},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#7", "pid": 0, "tid": 7,
   "ts": 1234600.0, "dur": 200, "args": {}},
  {"ph": "s", "id": 77, "pid": 42, "tid": 43, "ts": 1234569.001, "cat": "ac2g", "name": "ac2g"},
  {"ph": "f", "id": 77, "pid": 0, "tid": 7, "ts": 1234600.123, "cat": "ac2g", "name": "ac2g", "bp": "e"}
  ],
  "traceName": "/tmp/x.json",
  "baseTimeNanoseconds": 1700000000000000000
}
"""

BASE = 1_700_000_000_000_000_000


def _write(path: Path, text: str, gz: bool = False) -> Path:
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def test_synthetic_old_format(tmp_path):
    p = _write(tmp_path / "old.pt.trace.json", OLD_FORMAT)
    assert looks_like_kineto(p)
    prof = read_kineto(p)
    k = prof.kernels.sort_values("start").reset_index(drop=True)
    assert k["start"].tolist() == [900_000, 1_100_000, 1_300_000]
    assert k["end"].tolist() == [903_000, 1_130_000, 1_307_000]
    assert k["launch_start"].tolist() == [-1, 1_020_000, 1_200_000]  # 3rd: via the async flow
    thread = k.loc[1, "launch_tid"]
    assert k.loc[2, "launch_tid"] == thread and k.loc[0, "launch_tid"] == -1
    assert thread >> 24 == 100  # rank 0: pid << 24 | tid; the pthread id is renumbered
    assert thread & ((1 << 24) - 1) == 1 << 23
    assert prof.gpus.to_dict("records") == [{"gpu": 0, "pid": 100, "device": 0, "model": "unknown"}]
    assert prof.exporter_version == "kineto"
    r = prof.ranges
    assert r["name"].tolist() == ["ProfilerStep#1", "aten::mm", "ProfilerStep#2"]
    assert set(r["tid"]) == {thread} and set(r["pid"]) == {100}
    assert prof.extra["step_wall_ns"] == {1: 500_000, 2: 400_000}
    assert prof.extra["step_wall_ns_by_rank"] == {0: {"ProfilerStep#1": 500_000, "ProfilerStep#2": 400_000}}
    assert prof.extra["thread_names"] == {thread: "main"}
    assert (prof.capture_start, prof.capture_end) == (800_000, 2_800_000)
    per_step, unattributed = attribute_steps(prof)
    assert per_step == {"ProfilerStep#1": (2, 37_000)} and unattributed == 1
    assert {n: short_kernel_name(n) for n in k_names(prof)} == {
        "void ns::gemm<float, 4>(float*, int)": "gemm", "relu_kernel": "relu_kernel"}


@pytest.mark.parametrize("gz", [False, True])
def test_synthetic_new_format(tmp_path, gz):
    # gzip detected from the content, whatever the name says
    p = _write(tmp_path / "rank3.json", NEW_FORMAT, gz=gz)
    assert looks_like_kineto(p)
    prof = read_kineto(p)
    k = prof.kernels
    assert k["start"].tolist() == [BASE + 1_234_600_123, BASE + 1_234_700_999]
    assert k["end"].tolist() == [BASE + 1_234_612_468, BASE + 1_234_701_000]
    assert k["launch_start"].tolist() == [BASE + 1_234_569_001, BASE + 1_234_570_500]
    t_main = k.loc[0, "launch_tid"]
    assert t_main == (42 << 24) | 43  # rank 3, but alone: slot 0
    assert k.loc[1, "launch_tid"] == (42 << 24) | (1 << 23)  # negative tid renumbered
    g = prof.gpus
    assert g["model"].tolist() == ["Fake GPU A", "Fake GPU B"]
    assert g["device"].tolist() == [0, 1] and k["gpu"].tolist() == [0, 1]
    assert g["pid"].tolist() == [42, 42]
    r = prof.ranges
    assert r["name"].tolist() == ["ProfilerStep#7", "## forward ##", "aten::addmm"]  # no GPU-side copy
    assert r["start"].tolist() == [BASE + 1_234_567_891, BASE + 1_234_568_000, BASE + 1_234_568_500]
    assert r["end"].tolist() == [BASE + 1_234_668_391, BASE + 1_234_618_000, BASE + 1_234_578_750]
    assert set(r["tid"]) == {t_main} and set(r["pid"]) == {42}
    assert prof.extra["step_wall_ns"] == {7: 100_500}
    assert prof.extra["step_wall_ns_by_rank"] == {3: {"ProfilerStep#7": 100_500}}
    assert prof.extra["ranks"][0]["world_size"] == 4 and prof.extra["ranks"][0]["rank"] == 3
    assert prof.exporter_version == "kineto schema 1"
    assert "void at::native::(anonymous namespace)::k1<int>(int)" in k_names(prof)
    assert short_kernel_name("void at::native::(anonymous namespace)::k1<int>(int)") == "k1"
    per_step, unattributed = attribute_steps(prof)
    assert per_step == {"ProfilerStep#7": (1, 12_345)} and unattributed == 1


def test_synthetic_multi_rank_file_order(tmp_path):
    # two 2021 traces (no distributedInfo): ranks by file order, same OS ids kept apart
    d = tmp_path / "run"
    d.mkdir()
    _write(d / "a.json", OLD_FORMAT)
    _write(d / "b.json.gz", OLD_FORMAT.replace('"dur": 30,', '"dur": 31,'), gz=True)  # another rank: not a copy
    prof = read_kineto(d)
    ranks = [(r["rank"], Path(r["file"]).name) for r in prof.extra["ranks"]]
    assert ranks == [(0, "a.json"), (1, "b.json.gz")]
    assert prof.gpus["gpu"].tolist() == [0, 1] and prof.gpus["pid"].tolist() == [100, (1 << 24) | 100]
    k = prof.kernels
    t0 = set(k.loc[(k["gpu"] == 0) & (k["launch_tid"] >= 0), "launch_tid"])
    t1 = set(k.loc[(k["gpu"] == 1) & (k["launch_tid"] >= 0), "launch_tid"])
    assert len(t0) == len(t1) == 1 and not (t0 & t1)
    assert sorted(prof.extra["step_wall_ns_by_rank"]) == [0, 1]
    assert prof.extra["step_wall_ns"] == {1: 500_000, 2: 400_000}  # mean over the ranks
    per_step, unattributed = attribute_steps(prof)
    assert unattributed == 2  # both steps are named alike in both ranks; each rank attributes its own
    # a trace of another profiler generation (a declared rank, distributedInfo) is another run
    _write(d / "c.json", NEW_FORMAT.replace('"rank": 3', '"rank": 0'))
    with pytest.raises(InputError, match="different runs"):
        read_kineto(d)


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("x.json", b'{"a": 1}', "no traceEvents"),
        ("x.json", b'{"traceEvents": {"ph": "X"}}', "traceEvents is not a list"),
        ("x.json", b"[1, 2, 3]", "no trace events"),
        (
            "x.json",
            b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1}]}',
            "without GPU kernel events",
        ),
        ("x.json", b'{"traceEvents": [{"ph": "X", "cat": "kernel", ', "invalid JSON"),
        ("x.json", b'{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "invalid JSON"),
        ("x.json", b'[{"ph": "X", "cat": "kernel", "ts": 1, "dur": 1}] trailing', "invalid JSON"),
        ("x.json", b"hello", "not JSON"),
        ("x.json", b"", "empty file"),
        ("x.json", b"\xff\xfe{}", "not"),
        ("x.json.gz", b"\x1f\x8b\x08\x00garbage that is not deflate", "broken gzip"),
    ],
)
def test_bad_inputs(tmp_path, name, content, message):
    p = tmp_path / name
    p.write_bytes(content)
    with pytest.raises(InputError, match=message) as info:
        read_kineto(p)
    text = str(info.value)
    assert text.startswith(str(p)) and "\n" not in text


def test_truncated_gzip(tmp_path):
    good = gzip.compress(NEW_FORMAT.encode() * 1)
    p = tmp_path / "cut.json.gz"
    p.write_bytes(good[: len(good) // 2])
    with pytest.raises(InputError, match=r"cut\.json\.gz: broken gzip"):
        read_kineto(p)


def test_missing_file_and_empty_dir(tmp_path):
    with pytest.raises(InputError, match="nope.json"):
        read_kineto(tmp_path / "nope.json")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text('{"lr": 0.1}')
    with pytest.raises(InputError, match="no PyTorch profiler traces"):
        read_kineto(empty)


def test_looks_like_kineto(tmp_path):
    assert looks_like_kineto(_write(tmp_path / "t.bin", NEW_FORMAT, gz=True))
    assert looks_like_kineto(_write(tmp_path / "old.txt", OLD_FORMAT))
    assert not looks_like_kineto(_write(tmp_path / "c.json", '{"lr": 0.1}'))
    assert not looks_like_kineto(_write(tmp_path / "n.json", "[1, 2]"))
    assert not looks_like_kineto(_write(tmp_path / "h.json", "hello"))
    (tmp_path / "bad.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    assert not looks_like_kineto(tmp_path / "bad.gz")
    assert not looks_like_kineto(tmp_path / "missing.json")
    d = tmp_path / "d"
    d.mkdir()
    assert not looks_like_kineto(d)
    _write(d / "r0.json", NEW_FORMAT)
    assert looks_like_kineto(d)


def test_large_values_and_chunk_boundaries(tmp_path, monkeypatch):
    """Events spanning the reader's buffer boundaries, and a huge top-level value, parse intact."""

    monkeypatch.setattr(kineto_json, "_CHUNK", 7)
    blob = '"metadata": {"blob": "' + "x" * 5000 + '"},'
    text = NEW_FORMAT.replace('"schemaVersion": 1,', '"schemaVersion": 1, ' + blob)
    prof = read_kineto(_write(tmp_path / "t.json", text))
    assert prof.kernels["start"].tolist() == [BASE + 1_234_600_123, BASE + 1_234_700_999]
    assert len(prof.ranges) == 3


@pytest.mark.parametrize(
    "text, ns",
    [
        (5, 5000),
        ("1712195495505543.2", 1712195495505543200),
        ("1428625731896.179", 1428625731896179),
        ("63.813", 63813),
        ("0.001", 1),
        ("-0.5", -500),
        ("2.0005", 2000),  # half to even below 1 ns
        ("1e3", 1_000_000),
        (1.5, 1500),
    ],
)
def test_exact_ns(text, ns):
    assert _ns(text) == ns


def k_names(prof) -> set[str]:
    return set(prof.kernels["name"].cat.categories)


@pytest.mark.parametrize(
    "full, short",
    [
        ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, "
         "at::detail::Array<char*, 3> >(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)",
         "vectorized_elementwise_kernel"),
        ("void (anonymous namespace)::softmax_warp_backward<float, float, float, 10, true>(float*, int)",
         "softmax_warp_backward"),
        ("cask_cudnn::computeOffsetsKernel(cask_cudnn::ComputeOffsetsParams)", "computeOffsetsKernel"),
        ("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::bfloat16_copy_kernel_cuda("
         "at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int)",
         "vectorized_elementwise_kernel"),
        ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "ncclKernel_AllReduce_RING_LL_Sum_float"),
    ],
)
def test_short_kernel_name(full, short):
    assert short_kernel_name(full) == short
