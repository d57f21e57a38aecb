"""Kernel classification (``kbase.analysis.classify``) on the real kernel names of the Nsight Systems exports
in ../shared/data: tensor-core state, category and family of every name, and the leaderboard's columns equal
to it. The expected states are written out by hand from what each capture ran."""

from __future__ import annotations

import json

from helpers.cli import run_kbase
from helpers.shared import NSYS_DIR, require_shared, ro_connect

H100 = "h100_2gpu_fsdp_t5.sqlite"
H200 = "h200_nvfuser_crossentropy.sqlite"
MMAGIC = "a100_mmagic_vsr.sqlite"


def real_kernel_names() -> dict[str, set[str]]:
    out = {}
    for path in sorted(NSYS_DIR.glob("*.sqlite")):
        conn = ro_connect(path)
        try:
            out[path.name] = {
                r[0] for r in conn.execute(
                    "SELECT DISTINCT s.value FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                    "JOIN StringIds s ON s.id = k.demangledName"
                )
            }
        finally:
            conn.close()
    return out


def test_tc_rules_on_real_kernel_names() -> None:
    from kbase.analysis import classify

    require_shared()
    names = real_kernel_names()
    assert len(names) >= 5
    states = {}
    for file, ns in names.items():
        for n in ns:
            state, why = classify.tensor_core_state(n)
            assert state in (classify.TC_YES, classify.TC_FALLBACK, classify.TC_NA), (file, n)
            assert why
            assert classify.category(n) in (classify.COMPUTE, classify.COMMUNICATION, classify.MEMORY)
            assert classify.family_key(n)
            states[n] = state

    def of(file: str, state: str) -> set[str]:
        return {n for n in names[file] if states[n] == state}

    # H100 FSDP T5 run in fp32: every GEMM is an sm80 xmma FFMA kernel (no tensor cores), the rest
    # is elementwise / reduction / softmax / copy work that is not tensor-core eligible.
    h100_gemms = {n for n in names[H100] if n.startswith("sm80_xmma_gemm_f32f32")}
    assert len(h100_gemms) == 7
    assert all("_ffma_" in n for n in h100_gemms)
    assert of(H100, classify.TC_FALLBACK) == h100_gemms
    assert of(H100, classify.TC_YES) == set()
    # H200 nvFuser: the cuBLASLt nvjet GEMMs use tensor cores; nvFuser kernels are fused pointwise/
    # reductions.
    nvjet = {n for n in names[H200] if n.startswith("nvjet_")}
    assert len(nvjet) == 3
    assert of(H200, classify.TC_YES) == nvjet
    assert of(H200, classify.TC_FALLBACK) == set()
    assert all(states[n] == classify.TC_NA for n in names[H200] if "nvfuser_" in n)
    # A100 mmagic inference: cuDNN tf32 tensor-core convolutions next to fp32 SIMT sgemms.
    mm = names[MMAGIC]

    def one(pred) -> str:
        hits = [n for n in mm if pred(n)]
        assert len(hits) == 1, hits
        return hits[0]

    assert states[one(lambda n: "cutlass_tensorop_s1688fprop" in n)] == classify.TC_YES
    assert (states[one(lambda n: n.startswith("sm80_xmma_fprop_implicit_gemm_indexed_tf32"))]
            == classify.TC_YES)
    assert states[one(lambda n: "cutlass_80_simt_sgemm" in n)] == classify.TC_FALLBACK
    assert {n for n in mm if n.startswith("ampere_sgemm_")} <= of(MMAGIC, classify.TC_FALLBACK)
    assert len({n for n in mm if n.startswith("ampere_sgemm_")}) == 2
    # split-K reduction of an sgemm's partial sums, matrix-vector, layout transforms, im2col: not
    # matmul work a tensor core would take.
    assert states[one(lambda n: "splitKreduce_kernel" in n)] == classify.TC_NA
    assert states[one(lambda n: "gemvx::kernel" in n)] == classify.TC_NA
    assert states[one(lambda n: "nchwToNhwcKernel" in n)] == classify.TC_NA
    assert states[one(lambda n: "deformable_im2col" in n)] == classify.TC_NA
    assert of(MMAGIC, classify.TC_YES) == {
        one(lambda n: "cutlass_tensorop_s1688fprop" in n),
        one(lambda n: n.startswith("sm80_xmma_fprop_implicit_gemm_indexed_tf32")),
    }
    # Elementwise, reductions, copies, fills, softmax: never tensor-core eligible, in any export.
    for n in states:
        if any(w in n for w in ("elementwise_kernel", "reduce_kernel", "CatArrayBatchedCopy", "FillFunctor",
                                "softmax_warp_forward", "gather_kernel")):
            assert states[n] == classify.TC_NA, n
    for n in states:
        if "CatArrayBatchedCopy" in n or "FillFunctor" in n or "direct_copy_kernel" in n:
            assert classify.category(n) == classify.MEMORY, n
    # HPC codes (CloverLeaf stencils, MPI saxpy) have no matmul at all.
    for file in ("a100_cloverleaf.sqlite", "a100_saxpy_mpi.sqlite"):
        assert of(file, classify.TC_NA) == names[file]


def test_tc_column_in_leaderboard_matches_classify() -> None:
    from kbase.analysis import classify

    path = require_shared(H100)
    res = run_kbase("top", path, "--limit", "0", "--format", "json")
    assert res.rc == 0, str(res)
    doc = json.loads(res.stdout)
    for row in doc["kernels"]:
        assert row["tc"] == classify.tensor_core_state(row["name"])[0]
        assert row["category"] == classify.category(row["name"])
        assert row["family"] == classify.family_key(row["name"])
