"""The three diagnoses (``analysis.diagnosis``) and the ⚠ prescriptions (``analysis.prescription``): each rule on
made-up rows, then what they say on the real captures of ../shared/data."""

from __future__ import annotations

import json

import pytest

from kbase.analysis import diagnosis as dg
from kbase.analysis.prescription import gpu_arch, name_arch, prescription, tc_reason

from helpers.cli import run_kbase
from helpers.shared import KINETO_DIR, NSYS_DIR, SHARED_SKIP_REASON

SGEMM = "ampere_sgemm_128x64_nn"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >()"


def row(**kw) -> dict:
    base = {"name": ADD, "category": "compute", "tc": "na", "count": 100, "total_ns": 1_000_000.0,
            "avg_ns": 10_000.0, "median_ns": 10_000.0, "min_ns": 9_000, "max_ns": 11_000, "share_kernel": 0.2,
            "count_per_iter": 10.0}
    return base | kw


def test_thin_rows_get_no_diagnosis():
    d = dg.diagnose(row(share_kernel=0.049))
    assert d.kind is None and "thin: 4.9%" in d.reason
    assert dg.diagnose(row(share_kernel=float("nan"))).kind is None


def test_matmul_is_expected_and_a_fallback_says_so():
    assert dg.diagnose(row(name="nvjet_tst_192x192_64x4_2x1_v_bz_coopB_TNN", tc="tc")).kind == dg.EXPECTED
    d = dg.diagnose(row(name=SGEMM, tc="fallback"))
    assert d.kind == dg.EXPECTED and "CUDA cores" in d.reason
    # no tensor-core evidence either way, still a matmul by its name
    assert dg.diagnose(row(name="triton_tem_fused_0", tc="na")).kind == dg.EXPECTED


def test_elementwise_piled_up_by_count_is_a_fusion_candidate():
    d = dg.diagnose(row(count=2575, count_per_iter=515.0, avg_ns=12_870.0, median_ns=1_000.0, max_ns=376_000))
    assert d.kind == dg.NOT_EXPECTED and "piled up by Count" in d.reason and "515 launches per iteration" in d.reason
    few = dg.diagnose(row(count=44, count_per_iter=4.0, avg_ns=225_000.0, median_ns=220_000.0, max_ns=230_000))
    assert few.kind == dg.NOT_EXPECTED and "piled up" not in few.reason
    copies = dg.diagnose(row(category="memory", count_per_iter=96.0, avg_ns=28_000.0))
    assert "avoid the copies" in copies.reason
    no_iterations = dg.diagnose(row(count=300, count_per_iter=float("nan"), avg_ns=5_000.0))
    assert "piled up" in no_iterations.reason and "300 launches" in no_iterations.reason


def test_unhealthy_needs_a_far_max_and_uneven_iterations():
    spiky = row(max_ns=200_000, median_ns=10_000)  # 20x the median
    assert dg.diagnose(spiky, (1.0e6, 1.6e6), iterations=5).kind == dg.UNHEALTHY
    # the same spike repeated evenly every iteration is a mix of problem sizes, not a sick kernel
    assert dg.diagnose(spiky, (1.0e6, 1.05e6), iterations=5).kind != dg.UNHEALTHY
    # under 10x: never unhealthy, whatever the iterations say
    assert dg.diagnose(row(max_ns=90_000), (1.0, 3.0), iterations=5).kind != dg.UNHEALTHY
    # no iterations: the launches above the median must hold half the time
    tail = row(count=100, median_ns=2_000.0, max_ns=500_000, total_ns=1_000_000.0)  # 80% above the median
    assert dg.diagnose(tail).kind == dg.UNHEALTHY
    assert dg.diagnose(row(count=100, median_ns=9_000.0, max_ns=500_000, total_ns=1_000_000.0)).kind != dg.UNHEALTHY


def test_nccl_waiting_for_peers_at_4x():
    nccl = row(name="ncclDevKernel_AllReduce_Sum_bf16_RING_LL", category="communication", max_ns=50_000)
    d = dg.diagnose(nccl, (1.0e6, 2.0e6), iterations=4)
    assert d.kind == dg.UNHEALTHY and "waiting for peers" in d.reason and "5x the median" in d.reason
    steady = dg.diagnose(nccl | {"max_ns": 30_000}, (1.0e6, 2.0e6), iterations=4)
    assert steady.kind == dg.EXPECTED and "overlaps compute" in steady.reason


def test_annotate_reads_the_bounds_only_when_a_row_asks():
    calls = []

    def bounds():
        calls.append(1)
        return {ADD: (1.0e6, 1.6e6)}

    notes = dg.annotate([row(), row(name=SGEMM, tc="fallback")], ["NVIDIA A100-SXM4-80GB"], bounds, 5)
    assert calls == [] and [n.diagnosis for n in notes] == [dg.NOT_EXPECTED, dg.EXPECTED]
    assert "fix on Ampere" in notes[1].tc_reason and notes[0].tc_reason == "not matmul/convolution"
    notes = dg.annotate([row(max_ns=500_000), row(max_ns=600_000)], [], bounds, 5)
    assert calls == [1] and notes[0].diagnosis == dg.UNHEALTHY


@pytest.mark.parametrize("model, arch", [("Tesla V100-SXM2-32GB", "volta"), ("NVIDIA A100-PG509-200", "ampere"),
                                         ("NVIDIA H100 80GB HBM3", "hopper"), ("NVIDIA H200", "hopper"),
                                         ("GH100", "hopper"), ("NVIDIA B200", "blackwell"), ("Tesla T4", "turing"),
                                         ("NVIDIA L4", "ada"), ("NVIDIA GeForce RTX 3080", "ampere"),
                                         ("AMD Instinct MI300X", None), ("unknown", None)])
def test_gpu_arch(model, arch):
    assert gpu_arch([model]) == arch


def test_prescriptions_are_keyed_to_the_gpu():
    v100 = prescription("gemm", ["Tesla V100-SXM2-32GB"])
    assert "fp16 autocast" in v100 and "GradScaler" in v100 and "allow_tf32" not in v100 and "bf16 autocast" not in v100
    a100 = prescription("gemm", ["NVIDIA A100-SXM4-80GB"])
    assert "bf16 autocast" in a100 and "allow_tf32 = True" in a100 and "multiples of 8" in a100 and "fp8" not in a100
    assert "Transformer Engine" in prescription("gemm", ["NVIDIA H100 80GB HBM3"])
    conv = prescription("conv", ["NVIDIA A100-SXM4-80GB"])
    assert "cudnn.allow_tf32" in conv and "channels_last" in conv and "cudnn.benchmark = True" in conv
    assert "channels_last" in prescription("conv", ["Tesla V100-DGXS-32GB"])
    assert "pad GEMM dims" in prescription("half", ["NVIDIA A100-SXM4-80GB"])
    # the GPU unknown: the kernel's own architecture is a lower bound, else both families are named
    assert name_arch("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_ffma") == "ampere"
    assert prescription("gemm", ["unknown"], "sm80_xmma_gemm_f32f32_ffma").startswith("fix on Ampere or newer")
    both = prescription("gemm", [], "my_gemm")
    assert "Ampere or newer" in both and "Volta/Turing" in both


def test_tc_reason_of_a_stored_row_the_rules_now_disagree_with():
    reason = tc_reason("void split_embedding_codegen_forward_unweighted_kernel<float>()", "fallback", [])
    assert reason.startswith("classified ⚠ when stored; today's rules say -")


# --------------------------------------------------------------------------------------------- real captures


def top_json(path) -> dict:
    if not path.is_file():
        pytest.skip(SHARED_SKIP_REASON)
    res = run_kbase("top", str(path), "--format", "json", "--limit", "0", "--no-store")
    assert res.rc == 0, str(res)
    return json.loads(res.stdout)


def test_h100_fsdp_fp32_gemms_are_expected_and_told_their_fix():
    doc = top_json(NSYS_DIR / "h100_2gpu_fsdp_t5.sqlite")
    fat = [k for k in doc["kernels"] if k["diagnosis"]]
    assert [k["short_name"][:15] for k in fat] == ["sm80_xmma_gemm_"] * 2  # the two fp32 GEMMs hold 80%
    for k in fat:
        assert k["tc"] == "fallback" and k["diagnosis"] == "expected" and "CUDA cores" in k["diagnosis_reason"]
        # the export names no GPU: the sm80 kernel says Ampere or newer, so TF32/bf16 are the fix
        assert "fix on Ampere or newer" in k["tc_reason"] and "allow_tf32" in k["tc_reason"]
    assert all(k["diagnosis"] is None for k in doc["kernels"] if k["share_kernel"] < dg.FAT_SHARE)


def test_resnet50_a_a_pair_gets_the_same_diagnoses():
    """Two captures of one configuration: noise must not change a diagnosis of the top kernels."""
    a = top_json(KINETO_DIR / "v100_resnet50_w4_repeat_a.pt.trace.json.gz")
    b = top_json(KINETO_DIR / "v100_resnet50_w4_repeat_b.pt.trace.json.gz")
    da = {k["name"]: k["diagnosis"] for k in a["kernels"] if k["share_kernel"] >= 0.055}
    db = {k["name"]: k["diagnosis"] for k in b["kernels"] if k["name"] in da}
    assert da == db and len(da) >= 5
    by_short = {k["short_name"]: k for k in a["kernels"]}
    conv = by_short["dgrad_engine"]
    assert conv["diagnosis"] == "expected" and "fix on V100" in conv["tc_reason"]
    assert "channels_last" in conv["tc_reason"] and "fp16 autocast" in conv["tc_reason"]
    pile = max((k for k in a["kernels"] if k["short_name"] == "vectorized_elementwise_kernel"),
               key=lambda k: k["count"])
    assert pile["diagnosis"] == "not_expected" and "piled up by Count" in pile["diagnosis_reason"]
    assert not any(k["diagnosis"] == "unhealthy" for k in a["kernels"])  # steady training steps


def test_nccl_waiting_for_peers_is_unhealthy_on_real_traces():
    for trace in ("v100_df_index_resolver.json.gz", "a100_rank0_of16.json.gz"):
        doc = top_json(KINETO_DIR / trace)
        nccl = [k for k in doc["kernels"] if k["category"] == "communication" and k["diagnosis"]]
        assert nccl and all(k["diagnosis"] == "unhealthy" and "waiting for peers" in k["diagnosis_reason"]
                            for k in nccl), trace
