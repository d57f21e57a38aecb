"""Synthetic fresh processes: a workload run by several processes, as the captures the comparison pools
(``analysis.capture.Capture``, each kernel's time split by op), numbers only, no files.

``resnet``: every process picks its own convolution algorithms the way ``cudnn.benchmark`` does — per layer,
the fastest candidate as that process measured it — so near-ties flip between processes: work moves between
a convolution op's kernels (launch counts change, kernels appear and vanish, or a kernel serves other layers
at an unchanged launch count), and a helper kernel that some algorithms need changes its launch count with
them (cuDNN's ``scalePackedTensor_kernel``, 27 -> 28 per iteration). ``transformer``: the GEMMs keep their
kernels, but each process runs each of them a little faster or slower. In both, each process runs each
library-picked kernel at its own speed (``kernel_shift``: GPU clocks, memory placement; an H200's largest GEMM
ran 1.9% and 1.0% faster in two of four processes) and every launch jitters. Nothing but the process differs
between two captures, so a gate that fails on any pair cries wolf (``benchmarks/calibrate.py --only
simfresh``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kbase.analysis.capture import CAPTURE_TEXT, Capture
from kbase.analysis.ops import OpPairs
from kbase.analysis.sketch import build_sketches
from kbase.analysis.sparse import SparseRows
from kbase.analysis.summary import LeaderboardSummary

CONV_OPS = ("aten::cudnn_convolution", "aten::cudnn_convolution_backward_input",
            "aten::cudnn_convolution_backward_weight")
HELPER = "void cudnn::ops::scalePackedTensor_kernel<float, float>(cudnnTensor4dStruct, float *, float)"
OTHER_OPS = {  # op: (kernel, µs per launch, launches per iteration); one kernel may serve several ops
    "aten::cudnn_batch_norm": ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512>", 110.0, 53),
    "aten::cudnn_batch_norm_backward": ("void cudnn::bn_bw_1C11_kernel_new<float, float, float, 512>", 200.0, 53),
    "aten::add_": ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>", 16.0, 161),
    "aten::mul_": ("void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>", 9.0, 161),
    "aten::threshold_": ("void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel>", 60.0, 49),
    "aten::threshold_backward": ("void at::native::vectorized_elementwise_kernel<4, threshold_backward>", 80.0, 49),
    "aten::addmm": ("volta_sgemm_128x64_nn", 90.0, 1),
}
# A transformer's kernels by op, (kernel, µs per launch, launches per iteration), about 100 ms per iteration
# and 38 kernels as the H200 repeats had: the GEMMs keep their kernels (the largest holds 7.5%).
_GEMM_SHARES = (7.5, 6.5, 5.5, 5.0, 4.0, 3.5, 3.0, 2.5)
TRANSFORMER_OPS: dict[str, list[tuple[str, float, int]]] = {
    "aten::mm": [(f"nvjet_hsh_{128 + 32 * i}x128_64x4_2x1_v_bz_coopA_NNT", share * 1000 / 24, 24)
                 for i, share in enumerate(_GEMM_SHARES[:5])],
    "aten::addmm": [(f"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize{64 * (i + 1)}x256x64", share * 1000 / 16, 16)
                    for i, share in enumerate(_GEMM_SHARES[5:])],
    "aten::_flash_attention_forward": [("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128>>", 5000 / 8, 8)],
    "aten::_flash_attention_backward": [("void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<128>",
                                         12000 / 8, 8)],
    "aten::native_layer_norm": [("void at::native::vectorized_layer_norm_kernel<c10::BFloat16, float>", 6000 / 32,
                                 32)],
    **{f"aten::elementwise_{i}": [(f"void at::native::vectorized_elementwise_kernel<4, Functor{i}>", 2000 / 16, 16)]
       for i in range(27)},
}


@dataclass
class FreshSpec:
    """One workload and how its processes differ."""

    seed: int = 0
    kind: str = "resnet"  # or "transformer"
    layers: int = 16  # convolution layers (each op runs each once per iteration)
    algorithms: int = 5  # candidate kernels per convolution op
    iterations: int = 5
    kernel_shift: float = 0.015  # per-process sd of a library-picked kernel's speed
    other_shift: float = 0.002  # ... of any other kernel
    pick_noise: float = 0.03  # how noisily a process measures an algorithm when it picks one (near-ties flip)
    jitter: float = 0.01  # launch-to-launch sd
    helper_algorithms: tuple[int, ...] = (0, 1)  # algorithms that launch the helper (backward input only)
    inject: dict[str, float] = field(default_factory=dict)  # kernel name -> slowdown factor (a real regression)


@dataclass
class Workload:
    """The fixed part of a workload: layer sizes and each algorithm's speed on each layer."""

    spec: FreshSpec
    layer_us: np.ndarray  # (ops, layers) µs of the best algorithm
    speed: np.ndarray  # (ops, layers, algorithms) time factor of each candidate (1 = the best)

    def kernel(self, op: int, algorithm: int) -> str:
        short = ("implicit_convolve_sgemm", "dgrad_engine", "wgrad_alg0_engine")[op]
        return f"void cudnn::{short}<float, {128 << (algorithm % 4)}, {algorithm}>(int, float *)"


def workload(spec: FreshSpec) -> Workload:
    rng = np.random.default_rng([spec.seed, 0xF4E5])
    layer_us = np.exp(rng.uniform(np.log(150.0), np.log(2500.0), (len(CONV_OPS), spec.layers)))
    speed = 1.0 + rng.exponential(0.08, (len(CONV_OPS), spec.layers, spec.algorithms))
    speed[np.arange(len(CONV_OPS))[:, None], np.arange(spec.layers)[None, :],
          rng.integers(0, spec.algorithms, (len(CONV_OPS), spec.layers))] = 1.0  # one best per layer
    return Workload(spec, layer_us, speed)


def process(w: Workload, index: int, inject: dict[str, float] | None = None) -> Capture:
    """Process ``index`` of workload ``w``: its algorithm picks, its speeds, its iterations, as one capture."""
    spec = w.spec
    rng = np.random.default_rng([spec.seed, index, 0x9A0C])
    inject = {**spec.inject, **(inject or {})}
    launches: list[tuple[str, str, float, int]] = []  # (op, kernel, µs per launch, launches per iteration)
    if spec.kind == "transformer":
        launches = [(op, k, us, n) for op, ks in TRANSFORMER_OPS.items() for k, us, n in ks]
    for o, op in enumerate(CONV_OPS if spec.kind == "resnet" else ()):
        measured = w.speed[o] * (1.0 + rng.normal(0.0, spec.pick_noise, w.speed[o].shape))
        picked = measured.argmin(axis=1)
        for layer, a in enumerate(picked.tolist()):
            launches.append((op, w.kernel(o, a), w.layer_us[o, layer] * w.speed[o, layer, a], 1))
            if o == 1 and a in spec.helper_algorithms:
                launches.append((op, HELPER, 12.0, 1))
    for op, (kernel, us, n) in (OTHER_OPS.items() if spec.kind == "resnet" else ()):
        launches.append((op, kernel, us, n))
    kernels = sorted({k for _, k, _, _ in launches})
    library = {k: _library(k) for k in kernels}
    shift = {k: 1.0 + rng.normal(0.0, spec.kernel_shift if library[k] else spec.other_shift) for k in kernels}
    ops = sorted({op for op, _, _, _ in launches})
    # every launch of every iteration: (op code, kernel code, duration ns)
    op_code = np.array([ops.index(op) for op, _, _, n in launches for _ in range(n)])
    k_code = np.array([kernels.index(k) for _, k, _, n in launches for _ in range(n)])
    base = np.array([us * 1e3 * shift[k] * inject.get(k, 1.0) for _, k, us, n in launches for _ in range(n)])
    n_launch, n_it = len(base), spec.iterations
    dur = np.rint(base[None, :] * (1.0 + rng.normal(0.0, spec.jitter, (n_it, n_launch)))).clip(1.0)
    it = np.repeat(np.arange(n_it), n_launch)
    codes, ops_flat, flat = np.tile(k_code, n_it), np.tile(op_code, n_it), dur.ravel()
    count = np.bincount(codes, minlength=len(kernels)).astype(float)
    total = np.bincount(codes, weights=flat, minlength=len(kernels))
    mean = total / count
    var = np.bincount(codes, weights=(flat - mean[codes]) ** 2, minlength=len(kernels)) / np.maximum(count - 1, 1)
    iter_ns = np.zeros((len(kernels), n_it))
    np.add.at(iter_ns, (codes, it), flat)
    sk = build_sketches(codes, np.arange(len(codes)), flat, len(kernels))
    pair = ops_flat * len(kernels) + codes
    present, inverse = np.unique(pair, return_inverse=True)
    pair_iter = SparseRows.from_cells(inverse.ravel(), it, flat, (len(present), n_it))
    names = np.array(kernels, dtype=object)
    pairs = OpPairs(names=np.array(ops, dtype=object), bare=np.array(ops, dtype=object),
                    op=(present // len(kernels)).astype(np.int32), kernel=names[present % len(kernels)],
                    count=np.bincount(inverse).astype(np.int64), total_ns=np.bincount(inverse, weights=flat),
                    iter_ns=pair_iter)
    wall = float(dur.sum(axis=1).mean()) * 1.05  # an iteration: its kernels back to back, plus 5% idle
    summary = LeaderboardSummary.from_dict({
        "source": f"process {index}", "format": "synthetic", "gpus": 1, "aligned": True, "mode": "iterations",
        "iterations": n_it, "iteration_keys": list(range(n_it)), "window_ns": int(wall * n_it),
        "window_gpu_ns": int(wall * n_it), "total_kernel_ns": int(flat.sum()), "compute_ns": int(flat.sum()),
        "kernels": len(kernels), "launches": len(flat)})
    text = {c: np.array([_text(c, k) for k in kernels], dtype=object) for c in CAPTURE_TEXT}
    return Capture(summary=summary, names=names, text=text, gpus=np.ones(len(kernels), dtype=np.int64), count=count,
                   total_ns=total, avg_ns=mean, std_ns=np.sqrt(var), iter_ns=iter_ns,
                   sketches={k: sk[i] for i, k in enumerate(kernels)}, ops=pairs)


def _library(kernel: str) -> bool:
    """A kernel cuDNN/cuBLAS picked (a convolution algorithm or a GEMM): the ones a process runs at its own speed."""
    return any(s in kernel for s in ("convolve", "_engine", "sgemm", "nvjet", "xmma_gemm", "flash"))


def _text(column: str, kernel: str) -> str:
    short = kernel.split("<")[0].split("::")[-1].removeprefix("void ")
    return {"short_name": short, "family": short, "category": "compute",
            "tc": "fallback" if _library(kernel) else "na"}[column]


def without_ops(c: Capture) -> Capture:
    """The capture as a baseline stored without op information (before migration 0010) compares."""
    from dataclasses import replace

    return replace(c, ops=None)
