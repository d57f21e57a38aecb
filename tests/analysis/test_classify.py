"""Unit tests of kbase.analysis.classify on realistic kernel names (no profile data needed)."""

from __future__ import annotations

import pytest

from kbase.analysis import classify
from kbase.analysis.classify import COMMUNICATION, COMPUTE, MEMORY, TC_FALLBACK, TC_NA, TC_YES

CUTLASS3_GMMA = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4, "
    "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1>>, cutlass::gemm::KernelTmaWarpSpecialized>, "
    "cute::tuple<cute::C<128>, cute::C<128>, cute::C<64>>, cutlass::bfloat16_t>>>(T1::Params)"
)
FLASH_A = (
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, "
    "Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t>>, false, true, false, false, true, true, "
    "false, false>(Flash_fwd_params)"
)
FLASH_B = (
    "void flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::half_t, "
    "Flash_kernel_traits<64, 128, 128, 4, cutlass::half_t>>, true, false, false, false, false, true, "
    "false, false>(Flash_fwd_params)"
)
IMPLICIT_SGEMM = (
    "void cudnn::detail::implicit_convolve_sgemm<float, float, 1024, 5, 5, 3, 3, 3, 1, false, false, true>"
    "(int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned long long, int, "
    "float, float, int, float const*, float const*, bool, int, int)"
)
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ELEMENTWISE = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
)
CAT_COPY = (
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 4, 64, 64>(float*, "
    "at::native::(anonymous namespace)::CatArrInputTensorMetadata<float, unsigned int, 64, 64>, "
    "at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)"
)
GEMV = (
    "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false, "
    "cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float> >"
    "(cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>, "
    "float, float)"
)
REDUCE = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >"
    "(at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)"
)
LAYER_NORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, "
    "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
)
SPLITK_REDUCE = (
    "void splitKreduce_kernel<32, 16, int, float, float, float, float, true, false, false>"
    "(cublasSplitKParams<float>, float const*, float const*, float*, float const*, float const*, "
    "float const*, float const*, float*, void*, long, float*, int*)"
)
FILL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
    "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"
)

# (name, tensor-core state, category)
CASES = [
    # Hopper
    ("nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT", TC_YES, COMPUTE),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
     TC_YES, COMPUTE),
    (CUTLASS3_GMMA, TC_YES, COMPUTE),
    # Ampere / Volta tensor-core GEMMs
    ("cutlass_80_tensorop_s16816gemm_relu_bf16_128x128_32x3_nn_align8", TC_YES, COMPUTE),
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", TC_YES, COMPUTE),
    ("volta_h884gemm_64x64_ldg8_nn", TC_YES, COMPUTE),
    ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_execute_kernel__5x_cublas",
     TC_YES, COMPUTE),
    (FLASH_A, TC_YES, COMPUTE),
    (FLASH_B, TC_YES, COMPUTE),
    # matmul / convolution on the CUDA cores
    ("volta_scudnn_128x64_relu_interior_nn_v1", TC_FALLBACK, COMPUTE),
    (IMPLICIT_SGEMM, TC_FALLBACK, COMPUTE),
    ("sgemm_128x64_nn", TC_FALLBACK, COMPUTE),
    ("ampere_sgemm_128x64_nn", TC_FALLBACK, COMPUTE),
    ("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
     TC_FALLBACK, COMPUTE),
    ("void cutlass::Kernel<cutlass_80_simt_sgemm_128x32_8x5_nn_align1>(T1::Params)", TC_FALLBACK, COMPUTE),
    # not tensor-core eligible
    (NCCL, TC_NA, COMMUNICATION),
    ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", TC_NA, COMMUNICATION),
    (ELEMENTWISE, TC_NA, COMPUTE),
    (REDUCE, TC_NA, COMPUTE),
    (LAYER_NORM, TC_NA, COMPUTE),
    (CAT_COPY, TC_NA, MEMORY),
    (FILL, TC_NA, MEMORY),
    (GEMV, TC_NA, COMPUTE),
    (SPLITK_REDUCE, TC_NA, COMPUTE),
]


@pytest.mark.parametrize("name, state, cat", CASES, ids=[c[0][:48] for c in CASES])
def test_tensor_core_state_and_category(name: str, state: str, cat: str) -> None:
    got, why = classify.tensor_core_state(name)
    assert got == state, why
    assert isinstance(why, str) and why
    assert classify.category(name) == cat


def test_every_state_has_a_symbol() -> None:
    assert set(classify.TC_SYMBOL) == {TC_YES, TC_FALLBACK, TC_NA}
    assert classify.TC_SYMBOL[TC_YES] == "✓"
    assert classify.TC_SYMBOL[TC_FALLBACK] == "⚠"
    assert classify.TC_SYMBOL[TC_NA] == "-"


def test_unknown_name_is_not_applicable() -> None:
    assert classify.tensor_core_state("my_custom_stencil_kernel")[0] == TC_NA
    assert classify.category("my_custom_stencil_kernel") == COMPUTE


def test_communication_wins_over_everything() -> None:
    # an NCCL kernel name mentioning bf16 and a reduce is still communication, not tensor-core work
    state, why = classify.tensor_core_state(NCCL)
    assert state == TC_NA and "communication" in why


def test_family_key_strips_templates_and_arguments() -> None:
    assert classify.family_key(FLASH_A) == "flash_fwd_kernel"
    assert classify.family_key(FLASH_A) == classify.family_key(FLASH_B)
    assert FLASH_A != FLASH_B
    assert classify.family_key(IMPLICIT_SGEMM) == "cudnn::detail::implicit_convolve_sgemm"
    assert classify.family_key(NCCL) == "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"
    assert classify.family_key(ELEMENTWISE) == "at::native::vectorized_elementwise_kernel"
    # the elementwise and the fill kernel are two instances of one template
    assert classify.family_key(FILL) == classify.family_key(ELEMENTWISE)


def test_family_key_of_a_plain_name_is_the_name() -> None:
    for plain in ("nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT", "sgemm_128x64_nn",
                  "volta_h884gemm_64x64_ldg8_nn"):
        assert classify.family_key(plain) == plain


def test_family_key_never_empty() -> None:
    assert classify.family_key("<weird>") == "<weird>"
    assert classify.family_key("(x)") == "(x)"


def test_short_name() -> None:
    assert classify.short_name(FLASH_A) == "flash_fwd_kernel"
    assert classify.short_name(IMPLICIT_SGEMM) == "implicit_convolve_sgemm"
    assert classify.short_name(IMPLICIT_SGEMM, "implicit_convolve_sgemm_v2") == "implicit_convolve_sgemm_v2"
    assert classify.short_name("sgemm_128x64_nn") == "sgemm_128x64_nn"



def test_rules_are_case_insensitive_on_the_own_name() -> None:
    """The rules are written lower case and read the lower-cased own name: a plain C symbol (cuBLAS, NCCL,
    Triton, nvjet) classifies the same in any case, and so does a templated name whose own name changes case."""
    import random

    from kbase.synth.names import default_kernel_mix, scaled_kernel_mix

    assert all(r.pattern.pattern == r.pattern.pattern.lower() for r in classify.TC_RULES)
    rng = random.Random(7)
    names = [c[0] for c in CASES] + [k.name for k in default_kernel_mix() + scaled_kernel_mix(400, 4000)]
    for n in names:
        kind = classify.classify(n)
        own = kind.own
        shuffled = "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in own)
        variant = n.replace(own, shuffled) if own and own in n else n
        other = classify.classify(variant)
        assert (other.category, other.rule) == (kind.category, kind.rule), (n, variant)


def test_outside_brackets_matches_a_character_walk() -> None:
    """``names._outside_brackets`` skips to the brackets; a plain walk over every character is the reference."""
    import random

    from kbase.analysis.names import _outside_brackets

    def walk(name: str, brackets: str, closers: str) -> str:
        out, depth = [], 0
        for ch in name:
            if ch in brackets:
                depth += 1
            elif ch in closers and depth:
                depth -= 1
            elif depth == 0:
                out.append(ch)
        return "".join(out)

    rng = random.Random(3)
    names = [c[0] for c in CASES] + ["".join(rng.choice("ab <>()[]{}:,") for _ in range(rng.randint(0, 40)))
                                     for _ in range(3000)]
    for n in names:
        for b, c in (("<(", ">)"), ("<([{", ">)]}")):
            assert _outside_brackets(n, b, c) == walk(n, b, c), (n, b)


# ------------------------------------------------------------------ names and categories of issue 37


@pytest.mark.parametrize("name, exported, short", [
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_bf16_128x128_32x4_nn_align8>(T1::Params)", "Kernel2",
     "cutlass_80_tensorop_s1688gemm_bf16_128x128_32x4_nn_align8"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(T1::Params)", None,
     "cutlass_80_tensorop_s16816gemm_relu_bf16_64x64_64x4_tn_align8"),
    ("void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int>, float>>(T1::Params)",
     "device_kernel", "GemmUniversal"),
    ("void ck_tile::kentry<(int)2, ck_tile::FmhaFwdKernel<int>>(int)", None, "FmhaFwdKernel"),
    ("void cutlass::Kernel2<cutlass::enable_sm90_or_later<flash::FlashAttnFwdSm90<int>>>(int)", None,
     "FlashAttnFwdSm90"),
    ("void at::native::foo<4, F>(int, F)", None, "foo"),
    # cuBLAS' gemvx::kernel wraps no kernel (its first argument is a plain type): named with its namespace
    ("std::enable_if<!T7, void>::type internal::gemvx::kernel<int, int, float2, float2, (bool)0>(T13)", "kernel",
     "gemvx::kernel"),
])
def test_a_wrapper_kernel_is_named_by_what_it_wraps(name, exported, short):
    from kbase.analysis.names import short_name

    assert short_name(name, exported) == short


@pytest.mark.parametrize("name, category, tc", [
    ("<unnamed>::nvfuser_none_f0_c0_r0_g0(<unnamed>::Tensor<<unnamed>::__bfloat, (int)2, (int)2>, "
     "const __grid_constant__ CUtensorMap, const __grid_constant__ CUtensorMap)", "compute", "tc"),
    ("<unnamed>::nvfuser_pointwise_f0_c1_r0_g4(<unnamed>::Tensor<float, (int)3, (int)3>, CUtensorMap)", "compute", "na"),
    ("void warp_specialized_kernel<128, 256, 64>(CUtensorMap const, CUtensorMap const, float*)", "compute", "tc"),
    ("void scale_kernel<4>(CUtensorMap const, float*)", "compute", "na"),  # TMA alone is no matmul
    ("triton_poi_fused_copy_0", "memory", "na"),
    ("triton_poi_fused_zeros_2", "memory", "na"),
    ("triton_poi_fused_add_copy_1", "compute", "na"),  # arithmetic fused in: compute
    ("triton_poi_fused__to_copy_1", "compute", "na"),  # a cast
    ("void cutensor_internal_namespace::tensor_permute_kernel<float, 4>(float const*, float*)", "memory", "na"),
    ("void at::native::transpose_kernel<float>(float const*, float*)", "memory", "na"),
])
def test_hopper_tma_matmuls_and_data_movement(name, category, tc):
    kind = classify.classify(name)
    assert (kind.category.value, kind.rule.state.value) == (category, tc), kind.rule.why
