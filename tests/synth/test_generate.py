"""The generator's files are checked with plain SQL, independently of its Python, against its truth."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest

from kbase.errors import InputError
from kbase.synth.generate import (
    SCHEMA,
    ExportSpec,
    KernelSpec,
    default_kernel_mix,
    generate_export,
    global_pid,
    scaled_kernel_mix,
)

from helpers.shared import SHARED  # noqa: E402

REAL_325 = SHARED / "nsys" / "h100_2gpu_fsdp_t5.sqlite"
REAL_GPU = SHARED / "nsys" / "a100_cloverleaf.sqlite"

GEMM = "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_relu_bf16_128x128_32x3_nn_align8>(T1::Params)"
ADD = ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<c10::BFloat16>, "
       "std::array<char *, (unsigned long)3>>(int, T2, T3)")
FILL = ("void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, "
        "std::array<char *, (unsigned long)1>>(int, T2, T3)")
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<(unsigned long)4096>)"
NVJET = "nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT"


def small_mix() -> list[KernelSpec]:
    return [
        KernelSpec(NVJET, NVJET, 180_000, 6),
        KernelSpec(GEMM, "Kernel2", 90_000, 4),
        KernelSpec(ADD, "vectorized_elementwise_kernel", 12_000, 20),
        KernelSpec(NCCL, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 400_000, 2),
        KernelSpec(FILL, "vectorized_elementwise_kernel", 1_600, 120, jitter=0.05),
        KernelSpec("triton_poi_fused_add_mul_7", "triton_poi_fused_add_mul_7", 5_000, 1, every=2),
    ]


def gen(tmp_path: Path, name: str = "g.sqlite", **kw):
    kw.setdefault("kernels", small_mix())
    return generate_export(tmp_path / name, **kw)


def q(path: Path, sql: str, *args) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


PER_NAME = """
SELECT s.value, count(*), sum(k.end - k.start), min(k.end - k.start), max(k.end - k.start)
FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds s ON s.id = k.demangledName GROUP BY s.value"""

# kernel -> its launch (same process, same correlationId) -> the step range holding that launch's start
LAUNCHED = """
FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
  ON r.correlationId = k.correlationId
  AND ((r.globalTid >> 24) & 0xFFFFFF) = ((k.globalPid >> 24) & 0xFFFFFF)"""
IN_STEP = LAUNCHED + """
JOIN NVTX_EVENTS n ON n.eventType IN (59, 60) AND r.start >= n.start AND r.start < n.end
  AND (n.globalTid = r.globalTid)
  AND coalesce(n.text, (SELECT value FROM StringIds WHERE id = n.textId)) LIKE ?"""
PER_STEP = f"""
SELECT ((r.globalTid >> 24) & 0xFFFFFF) - 1000,
       coalesce(n.text, (SELECT value FROM StringIds WHERE id = n.textId)),
       s.value, count(*), sum(k.end - k.start)
{IN_STEP} JOIN StringIds s ON s.id = k.demangledName GROUP BY 1, 2, 3"""


def check_per_name(path: Path, truth) -> None:
    got = {r[0]: tuple(r[1:]) for r in q(path, PER_NAME)}
    want = {n: (t.count, t.total_ns, t.min_ns, t.max_ns) for n, t in truth.kernels.items()}
    assert got == want


def check_per_step(path: Path, truth, pattern: str = "ProfilerStep#%") -> None:
    step_of = {text: k for k, text in truth.markers.items()}
    got: dict = defaultdict(dict)
    for rank, text, name, count, total in q(path, PER_STEP, pattern):
        got[(rank, step_of[text])][name] = (count, total)
    want = {(rank, k): truth.per_iteration(rank, k) for rank in truth.ranges for k in truth.ranges[rank]}
    assert {key: v for key, v in want.items() if v} == dict(got)


@pytest.mark.slow
def test_default_mix_truth_and_attribution(tmp_path):
    truth = generate_export(tmp_path / "d.sqlite", n_gpus=2, iterations=10)  # > one 50k-row batch
    assert truth.n_kernels > 50_000
    assert q(truth.path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] == truth.n_kernels
    check_per_name(truth.path, truth)
    check_per_step(truth.path, truth)
    assert truth.unattributed == truth.outside_ranges == 0
    names = set(truth.kernels)
    assert {k.name for k in default_kernel_mix()} == names
    assert (any("ncclDevKernel_AllReduce" in n for n in names)
            and any(n.startswith("nvjet_hsh") for n in names))


def test_gpu_lags_launches(tmp_path):
    truth = gen(tmp_path, iterations=4)
    ends_after, starts_after = q(truth.path, f"SELECT sum(k.end > n.end), sum(k.start > n.end) {IN_STEP}",
                                 "ProfilerStep#%")[0]
    assert ends_after > 0 and starts_after > 0
    # the range's own kernels are not all inside it: a GPU-time window would misattribute them
    check_per_step(truth.path, truth)


def test_two_ranks_share_correlation_ids(tmp_path):
    truth = gen(tmp_path, n_gpus=2, iterations=3)
    procs = q(truth.path, "SELECT pid, globalPid FROM PROCESSES ORDER BY pid")
    assert procs == [(1000, global_pid(1000)), (1001, global_pid(1001))]
    assert (q(truth.path, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY 1")
            == [(0,), (1,)])
    shared = q(truth.path, """SELECT count(*) FROM (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME
                              GROUP BY correlationId HAVING count(DISTINCT globalTid) = 2)""")[0][0]
    assert shared > 0  # joining on correlationId alone would cross ranks
    assert set(truth.ranges) == {0, 1} and all(len(r) == 3 for r in truth.ranges.values())
    tids = q(truth.path, "SELECT DISTINCT globalTid FROM NVTX_EVENTS ORDER BY 1")
    assert tids == [(global_pid(1000) | 1000,), (global_pid(1001) | 1001,)]


def test_start_mid_iteration(tmp_path):
    truth = gen(tmp_path, start_mid_iteration=True, iterations=4, first_step=5)
    texts = {r[0] for r in q(truth.path, "SELECT text FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%'")}
    assert texts == {"ProfilerStep#6", "ProfilerStep#7", "ProfilerStep#8"}
    assert all(set(r) == {1, 2, 3} for r in truth.ranges.values())
    check_per_name(truth.path, truth)
    check_per_step(truth.path, truth)
    no_launch = q(truth.path, """SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL k WHERE NOT EXISTS (
        SELECT 1 FROM CUPTI_ACTIVITY_KIND_RUNTIME r WHERE r.correlationId = k.correlationId
        AND ((r.globalTid >> 24) & 0xFFFFFF) = ((k.globalPid >> 24) & 0xFFFFFF))""")[0][0]
    assert no_launch == truth.unattributed > 0
    launched = q(truth.path, f"SELECT count(*) {LAUNCHED}")[0][0]
    in_steps = q(truth.path, f"SELECT count(*) {IN_STEP}", "ProfilerStep#%")[0][0]
    assert launched - in_steps == truth.outside_ranges > 0


def test_slice_cuts_launches(tmp_path):
    truth = gen(tmp_path, slice_cuts_launches=7, iterations=2)
    assert truth.unattributed == 14  # 7 per process
    rows = q(truth.path, """SELECT k.globalPid, k.correlationId, r.start IS NULL
        FROM CUPTI_ACTIVITY_KIND_KERNEL k
        LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
        AND ((r.globalTid >> 24) & 0xFFFFFF) = ((k.globalPid >> 24) & 0xFFFFFF)
        ORDER BY k.globalPid, k.correlationId""")
    for gpid in {r[0] for r in rows}:
        flags = [r[2] for r in rows if r[0] == gpid]
        assert flags[:7] == [1] * 7 and not any(flags[7:])  # the first launches of the capture
    check_per_name(truth.path, truth)
    check_per_step(truth.path, truth)


def test_schema_matches_real_export(tmp_path):
    if not REAL_325.exists() or not REAL_GPU.exists():
        pytest.skip(f"real nsys exports not found under {SHARED / 'nsys'} (shared data not laid out)")
    truth = gen(tmp_path, iterations=1)
    ours = {r[0] for r in q(truth.path, "SELECT name FROM sqlite_master WHERE type='table'")}
    assert ours == set(SCHEMA)
    info = "SELECT cid, name, type, \"notnull\", pk FROM pragma_table_info(?)"
    for table in SCHEMA:
        real = REAL_GPU if table == "TARGET_INFO_GPU" else REAL_325
        assert q(truth.path, info, table) == q(real, info, table), table
    assert q(REAL_325, "SELECT globalPid FROM PROCESSES WHERE pid = 111") == [(global_pid(111),)]
    meta = dict(q(truth.path, "SELECT name, value FROM META_DATA_EXPORT"))
    assert meta["EXPORT_SCHEMA_VERSION"] == "3.25.0" and meta["EXPORT_PRODUCT_VERSION"] == "2026.2.1.210"
    assert q(truth.path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET") == [(0,)]
    assert (q(truth.path, "SELECT DISTINCT tensorSizeMinusOneElements FROM CUPTI_ACTIVITY_KIND_KERNEL")
            == [("[]",)])


def test_names_and_metadata(tmp_path):
    truth = gen(tmp_path, gpu_model="NVIDIA H200", iterations=1)
    rows = q(truth.path, """SELECT d.value, s.value, m.value FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN StringIds d ON d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName
        JOIN StringIds m ON m.id = k.mangledName GROUP BY 1""")
    by_name = {r[0]: r[1:] for r in rows}
    assert by_name[GEMM][0] == "Kernel2" and by_name[GEMM][1].startswith("_ZN7cutlass7Kernel2")
    assert by_name[NVJET] == (NVJET, NVJET)
    apis = dict(q(truth.path, """SELECT s.value, count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
        JOIN StringIds s ON s.id = r.nameId GROUP BY 1"""))
    assert apis["cudaLaunchKernel_v7000"] > 0 and apis["cudaStreamSynchronize_v3020"] == 2
    assert q(truth.path, "SELECT DISTINCT name FROM TARGET_INFO_GPU") == [("NVIDIA H200",)]
    assert q(truth.path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0] == 2


def test_knobs_change_only_their_kernel(tmp_path):
    base = gen(tmp_path, "a.sqlite", iterations=3)
    new = KernelSpec("void at::native::<unnamed>::softmax_warp_forward<float, float, float, (int)7, (bool)0, "
                     "(bool)0>(T2 *, const T1 *, int, int, int, const bool *, int, bool)",
                     "softmax_warp_forward", 20_000, 3)
    renamed = GEMM.replace("128x128_32x3", "256x128_32x3")
    var = gen(tmp_path, "b.sqlite", iterations=3, slowdown={NVJET: 1.10}, extra_launches={ADD: 5},
              drop={FILL}, add=[new], rename={GEMM: renamed})
    b, v = base.kernels, var.kernels
    assert FILL not in v and GEMM not in v and new.name in v and v[new.name].count == 3 * 3 * 2
    assert v[renamed] == b[GEMM]
    assert v[NCCL] == b[NCCL]  # untouched kernels keep their exact durations
    assert 1.09 < v[NVJET].total_ns / b[NVJET].total_ns < 1.11 and v[NVJET].count == b[NVJET].count
    assert v[ADD].count == b[ADD].count * 25 // 20
    short = q(var.path, "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k JOIN StringIds d ON "
              "d.id = k.demangledName JOIN StringIds s ON s.id = k.shortName WHERE d.value = ?", renamed)
    assert short == [("Kernel2",)]
    check_per_name(var.path, var)
    check_per_step(var.path, var)
    with pytest.raises(ValueError, match="not in the mix"):
        gen(tmp_path, "c.sqlite", slowdown={"nope": 2.0})


def test_nvtx_variants(tmp_path):
    truth = gen(tmp_path, "ids.sqlite", nvtx_text_ids=True, marker_event_type=60, iterations=3)
    assert q(truth.path, "SELECT count(*) FROM NVTX_EVENTS WHERE text IS NOT NULL") == [(0,)]
    assert q(truth.path, "SELECT count(*), count(rangeId), count(endGlobalTid) FROM NVTX_EVENTS "
                         "WHERE eventType = 60") == [(6, 6, 6)]
    check_per_step(truth.path, truth)
    empty = gen(tmp_path, "none.sqlite", nvtx=False, iterations=1)
    assert q(empty.path, "SELECT count(*) FROM NVTX_EVENTS") == [(0,)]
    gone = gen(tmp_path, "gone.sqlite", nvtx=False, nvtx_table=False, iterations=1)
    assert q(gone.path, "SELECT count(*) FROM sqlite_master WHERE name = 'NVTX_EVENTS'") == [(0,)]
    check_per_name(gone.path, gone)


def test_overwrite_and_determinism(tmp_path):
    a = gen(tmp_path, "x.sqlite", iterations=2)
    with pytest.raises(InputError, match="exists"):
        gen(tmp_path, "x.sqlite", iterations=2)
    with pytest.raises(FileExistsError):
        gen(tmp_path, "x.sqlite", iterations=2)
    b = gen(tmp_path, "x.sqlite", iterations=2, overwrite=True)
    assert a.kernels == b.kernels and a.ranges == b.ranges
    c = gen(tmp_path, "y.sqlite", iterations=2, seed=1)
    assert c.kernels != a.kernels
    assert not list(tmp_path.glob("*.partial"))


def test_scaled_mix(tmp_path):
    mix = scaled_kernel_mix(300, 200, seed=3)
    assert len({k.name for k in mix}) == 300
    assert abs(sum(k.launches_per_iter / k.every for k in mix) - 200) < 2
    assert any(k.every > 1 for k in mix) and max(len(k.name) for k in mix) > 120
    truth = gen(tmp_path, kernels=mix, n_gpus=3, iterations=6)
    check_per_name(truth.path, truth)
    check_per_step(truth.path, truth)
    assert sum(1 for r in truth.ranges.values() for _ in r) == 18


def test_rejects_bad_specs(tmp_path):
    with pytest.raises(ValueError):
        gen(tmp_path, n_gpus=0)
    with pytest.raises(ValueError):
        gen(tmp_path, drop={k.name for k in small_mix()})
    assert ExportSpec().n_gpus == 2 and ExportSpec().kernels
