"""Kernel mixes for :mod:`kbase.synth.generate`: realistic kernel names as Nsight Systems prints them.

Demangled names follow nsys' demangler style (``(int)4``, ``(bool)0``, ``<unnamed>``,
``T1::Params``); cuBLAS/nvjet/NCCL kernels that are plain C symbols have the same text for
``demangledName`` and ``shortName``, as in real exports.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class KernelSpec:
    """One kernel of a generated workload.

    ``name`` is the full demangled name (what ``demangledName`` points at), ``short_name`` the
    base name (``shortName``). Each launch lasts about ``mean_ns`` (lognormal, relative std
    ``jitter``, integer ns >= 1). ``launches_per_iter`` launches happen in every iteration whose
    index ``k`` satisfies ``k % every == 0`` (``every=1``: every iteration).
    """

    name: str
    short_name: str
    mean_ns: int
    launches_per_iter: int
    jitter: float = 0.02
    every: int = 1


_EW = ("void at::native::vectorized_elementwise_kernel<(int)4, {f}, "
       "std::array<char *, (unsigned long){n}>>(int, T2, T3)")
_NCCL_ARGS = "(ncclDevKernelArgsStorage<(unsigned long)4096>)"


def _ew(functor: str, n: int) -> str:
    return _EW.format(f=functor, n=n)


def default_kernel_mix() -> list[KernelSpec]:
    """A bf16 transformer training step on Hopper (FSDP, 2 ranks): ~2,600 launches per step."""
    bf = "c10::BFloat16"
    ks = KernelSpec
    return [
        ks("nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT", "nvjet_hsh_256x128_64x4_2x1_v_bz_coopA_NNT",
           182_000, 48),
        ks("nvjet_hsh_192x192_64x3_1x2_h_bz_coopB_TNT", "nvjet_hsh_192x192_64x3_1x2_h_bz_coopB_TNT",
           151_000, 48),
        ks("nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_TNN", "nvjet_hsh_128x256_64x4_1x2_h_bz_coopA_TNN",
           97_000, 48),
        ks("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_cgasize1x2x1_warpgroupsize2x1x1"
           "_execute_segment_k_off_kernel__5x_cublas",
           "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_cgasize1x2x1_warpgroupsize2x1x1"
           "_execute_segment_k_off_kernel__5x_cublas", 210_000, 12),
        ks("void cutlass::Kernel2<cutlass3x_sm90_tensorop_gmma_s64x128x16gemm_bf16_bf16_f32_bf16_bf16"
           "_128x128x64_2x1x1_0_tnn_align8_warpspecialized_cooperative_epi_tma>(T1::Params)",
           "Kernel2", 88_000, 12),
        ks("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<(int)128, (int)128, (int)64, (int)4, "
           "(bool)0, (bool)0, cutlass::bfloat16_t, Flash_kernel_traits<(int)128, (int)128, (int)64, (int)4, "
           "cutlass::bfloat16_t>>, (bool)0, (bool)1, (bool)0, (bool)0, (bool)1, (bool)1, (bool)0, (bool)0>"
           "(flash::Flash_fwd_params)", "flash_fwd_kernel", 352_000, 12),
        ks("void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<(int)128, "
           "(int)64, (int)128, (int)8, (int)2, (int)4, (int)2, (bool)0, (bool)0, cutlass::bfloat16_t, "
           "Flash_kernel_traits<(int)128, (int)64, (int)128, (int)8, cutlass::bfloat16_t>>, (bool)1, "
           "(bool)0, (bool)0, (bool)0, (bool)0, (bool)0, (bool)0, (bool)0>(flash::Flash_bwd_params)",
           "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel", 905_000, 12),
        ks(_ew(f"at::native::CUDAFunctor_add<{bf}>", 3), "vectorized_elementwise_kernel", 12_400, 200),
        ks(_ew(f"at::native::BinaryFunctor<{bf}, {bf}, {bf}, "
               "at::native::binary_internal::MulFunctor<float>>", 3),
           "vectorized_elementwise_kernel", 11_800, 120),
        ks(_ew("at::native::<unnamed>::GeluCUDAKernelImpl(at::TensorIteratorBase &, at::native::GeluType)::"
               "[lambda() (instance 2)]::operator ()() const::[lambda() (instance 4)]::operator ()() const::"
               f"[lambda({bf}) (instance 1)]", 2), "vectorized_elementwise_kernel", 39_500, 24),
        ks(f"void at::native::<unnamed>::vectorized_layer_norm_kernel<{bf}, float>(int, T2, const T1 *, "
           "const T1 *, const T1 *, T2 *, T2 *, T1 *)", "vectorized_layer_norm_kernel", 21_300, 25),
        ks(f"void at::native::<unnamed>::layer_norm_grad_input_kernel_vectorized<{bf}, float>(const T1 *, "
           "const T1 *, const T2 *, const T2 *, const T1 *, T1 *, int)",
           "layer_norm_grad_input_kernel_vectorized", 33_700, 25),
        ks("void at::native::reduce_kernel<(int)512, (int)1, at::native::ReduceOp<float, "
           "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator ()"
           "(at::TensorIterator &)::[lambda(float, float) (instance 1)]>, unsigned int, float, (int)4, "
           "(int)4>>(T3)", "reduce_kernel", 15_900, 50),
        ks(f"void <unnamed>::softmax_warp_forward<{bf}, {bf}, float, (int)10, (bool)0, (bool)0>(T2 *, "
           "const T1 *, int, int, int, const bool *, int, bool)", "softmax_warp_forward", 27_200, 12),
        ks(f"void <unnamed>::softmax_warp_backward<{bf}, {bf}, float, (int)10, (bool)0, (bool)0>(T2 *, "
           "const T1 *, const T1 *, int, int, int, const bool *)", "softmax_warp_backward", 30_100, 12),
        ks("ncclDevKernel_AllReduce_Sum_bf16_RING_LL" + _NCCL_ARGS,
           "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 812_000, 2),
        ks("ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL" + _NCCL_ARGS,
           "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL", 455_000, 12),
        ks("ncclDevKernel_AllGather_RING_LL" + _NCCL_ARGS, "ncclDevKernel_AllGather_RING_LL", 398_000, 12),
        ks("void gemmSN_NN_kernel<float, (int)256, (int)4, (int)2, (int)8, (int)4, (int)4, (bool)0, "
           "cublasGemvTensorStridedBatched<const float>, cublasGemvTensorStridedBatched<const float>, "
           "cublasGemvTensorStridedBatched<float>>(cublasGemmSmallNParams<T9, T10, T11, T1>)",
           "gemmSN_NN_kernel", 61_000, 4),
        ks("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4"
           "_execute_kernel__5x_cublas",
           "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize64x256x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4"
           "_execute_kernel__5x_cublas", 125_000, 4),
        ks("void at::native::<unnamed>::multi_tensor_apply_kernel<"
           "at::native::<unnamed>::TensorListMetadata<(int)4>, "
           "at::native::<unnamed>::FusedAdamMathFunctor<float, (int)4, (at::native::ADAM_MODE)1, (bool)0>, "
           "double *, double, double, double, double, double, bool, double *, double *>(T1, T2, T3...)",
           "multi_tensor_apply_kernel", 24_800, 40),
        # The fragmented one: thousands of tiny launches per step.
        ks(_ew("at::native::FillFunctor<float>", 1), "vectorized_elementwise_kernel", 1_600, 2000,
           jitter=0.05),
    ]


_DTYPES = ["float", "c10::BFloat16", "c10::Half", "double", "long", "int", "bool", "signed char"]
_FUNCTORS = ["CUDAFunctor_add", "CUDAFunctorOnSelf_add", "MulFunctor", "DivFunctor", "FillFunctor",
             "AbsFunctor", "CompareEqFunctor", "CompareGTFunctor", "MaxFunctor", "MinFunctor", "WhereFunctor",
             "ExpFunctor", "SigmoidFunctor", "TanhFunctor", "SiluFunctor", "RsqrtFunctor", "PowFunctor",
             "NegFunctor"]
_REDUCE = ["sum_functor", "MeanOps", "MaxOps", "MinOps", "NormTwoOps", "ArgMaxOps", "WelfordOps"]
_TRITON = ["poi_fused_add_mul", "poi_fused__to_copy_add_mul_pow", "red_fused__to_copy_add_mean_mul_pow_rsqrt",
           "per_fused__log_softmax_nll_loss", "poi_fused_cat_clone_slice",
           "red_fused_native_layer_norm_backward", "poi_fused_gelu_gelu_backward",
           "per_fused_add_native_layer_norm", "tem_fused_mm_relu"]


def _scaled_name(rng: np.random.Generator, serial: int) -> tuple[str, str, int]:
    """One random realistic (name, short_name, typical mean ns)."""
    family = int(rng.integers(0, 6))
    pick = lambda xs: xs[int(rng.integers(0, len(xs)))]  # noqa: E731
    tile = f"{pick([64, 128, 192, 256])}x{pick([64, 128, 192, 256])}"
    if family == 0:
        name = (f"nvjet_{pick(['hsh', 'tst', 'sss', 'hss'])}_{tile}_64x{pick([3, 4, 5, 6])}"
                f"_{pick(['1x2', '2x1'])}_{pick(['h', 'v'])}_bz_coop{pick(['A', 'B'])}"
                f"_{pick(['NNT', 'TNN', 'NTN', 'TNT'])}")
        return name, name, int(rng.integers(20_000, 400_000))
    if family == 1:
        name = (
            f"sm90_xmma_gemm_{pick(['bf16bf16_bf16f32_f32', 'f16f16_f16f32_f32', 'e4m3e4m3_bf16f32_f32'])}"
            f"_{pick(['tn', 'nt', 'nn'])}_n_tilesize{tile}x64_cgasize{pick(['1x1x1', '1x2x1', '2x1x1'])}"
            f"_warpgroupsize{pick(['1x1x1', '2x1x1'])}_execute_segment_k_{pick(['off', 'on'])}"
            "_kernel__5x_cublas")
        return name, name, int(rng.integers(30_000, 500_000))
    if family == 2:
        inner = (f"cutlass_80_tensorop_{pick(['s16816gemm', 'h16816gemm', 'bf16_s16816gemm'])}"
                 f"_{pick(['relu_', ''])}{pick(['bf16', 'f16'])}_{tile}_{pick([32, 64])}x{pick([3, 4, 5])}"
                 f"_{pick(['nn', 'tn', 'nt'])}_align{pick([2, 4, 8])}")
        return f"void cutlass::Kernel2<{inner}>(T1::Params)", "Kernel2", int(rng.integers(20_000, 300_000))
    if family == 3:
        dt = pick(_DTYPES)
        functor = f"at::native::{pick(_FUNCTORS)}<{dt}>"
        if rng.random() < 0.5:
            op = f"at::native::binary_internal::{pick(_FUNCTORS)}<{dt}>"
            functor = f"at::native::BinaryFunctor<{dt}, {dt}, {dt}, {op}>"
        return _EW.format(f=functor, n=pick([1, 2, 3])).replace("(int)4", f"(int){pick([2, 4, 8])}", 1), \
            "vectorized_elementwise_kernel", int(rng.integers(1_000, 40_000))
    if family == 4:
        dt = pick(["float", "c10::BFloat16", "c10::Half", "double"])
        name = (f"void at::native::reduce_kernel<(int){pick([128, 256, 512])}, (int){pick([1, 2, 4])}, "
                f"at::native::ReduceOp<{dt}, at::native::{pick(_REDUCE)}<{dt}, float, float, float>, "
                f"unsigned int, {dt}, (int)4, (int){pick([1, 2, 4])}>>(T3)")
        return name, "reduce_kernel", int(rng.integers(3_000, 60_000))
    name = f"triton_{pick(_TRITON)}_{serial}"
    return name, name, int(rng.integers(2_000, 80_000))


def scaled_kernel_mix(n_distinct: int, launches_per_iter_total: int, seed: int = 0) -> list[KernelSpec]:
    """``n_distinct`` distinct realistic kernels, about ``launches_per_iter_total`` launches per iteration.

    Launch rates follow a Zipf law; kernels rarer than once per iteration get ``every > 1`` (one
    launch every ``every`` iterations), so the total may be below the number of names.
    """
    if n_distinct < 1 or launches_per_iter_total < 1:
        raise ValueError("n_distinct and launches_per_iter_total must be >= 1")
    rng = np.random.default_rng([seed, 0x5CA1ED])
    seen: set[str] = set()
    picked: list[tuple[str, str, int]] = []
    serial = 0
    while len(picked) < n_distinct:
        name, short, mean = _scaled_name(rng, serial)
        serial += 1
        if name not in seen:
            seen.add(name)
            picked.append((name, short, mean))
    rates = 1.0 / np.arange(1, n_distinct + 1) ** 1.1
    rates *= launches_per_iter_total / rates.sum()
    specs = []
    for (name, short, mean), rate in zip(picked, rates):
        if rate >= 1:
            specs.append(KernelSpec(name, short, mean, int(round(rate))))
        else:
            specs.append(KernelSpec(name, short, mean, 1, every=min(int(round(1 / rate)), 1000)))
    got = sum(s.launches_per_iter / s.every for s in specs)
    specs[0].launches_per_iter = max(
        1, specs[0].launches_per_iter + int(round(launches_per_iter_total - got)))
    return specs
