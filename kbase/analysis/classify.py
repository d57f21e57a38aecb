"""What a kernel is, from its name alone: category, tensor-core state, and the family key.

Tensor-core state has three values, decided by the first matching rule of ``TC_RULES``:

- ``✓`` (``tc``): the name shows a tensor-core path (Hopper cuBLAS ``nvjet``, ``wgmma``/``gmma``,
  CUTLASS ``tensorop``, ``hmma``/``imma``, MMA tile shapes like ``16816``/``1688``/``884``,
  half/bf16/tf32/fp8 ``xmma`` GEMMs, flash attention, tensor-core cuDNN kernels);
- ``⚠`` (``fallback``): a matmul/convolution kernel whose name shows no tensor-core path (fp32
  ``sgemm``/``ffma`` GEMMs, ``scudnn``, ``implicit_convolve_sgemm``, winograd) — eligible work
  that ran on the CUDA cores;
- ``-`` (``na``): not eligible — elementwise, reductions, normalisation, copies, communication.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kbase.analysis.names import family_key, short_name  # noqa: F401 - re-exported
from kbase.enums import Category, TcState

COMPUTE = Category.COMPUTE
COMMUNICATION = Category.COMMUNICATION
MEMORY = Category.MEMORY

TC_YES = TcState.YES
TC_FALLBACK = TcState.FALLBACK
TC_NA = TcState.NA
TC_SYMBOL = {s.value: s.symbol for s in TcState}

_COMM = re.compile(
    r"nccl|rccl|nvshmem|cross_device_reduce|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|"
    r"sendrecv",
    re.I,
)
_MEMORY = re.compile(
    r"memcpy|memset|direct_copy_kernel|copy_kernel|CatArrayBatchedCopy|FillFunctor|fill_kernel|"
    r"transpose_copy|\bcopy_|_copy\b",
    re.I,
)


def _folded(p: re.Pattern) -> re.Pattern:
    """``p`` (case-insensitive) for an ASCII name already lower-cased: the same matches, ~4x faster on the
    long template names of real exports (IGNORECASE costs Python's engine more than one ``str.lower``).
    kbase's patterns hold no upper-case escape (``\\D``, ``\\W``...), so lower-casing their text is exact."""
    return re.compile(p.pattern.lower())


@dataclass(frozen=True)
class TcRule:
    pattern: re.Pattern
    state: TcState
    why: str


def _r(p: str) -> re.Pattern:
    return re.compile(p, re.I)


# Order matters: the first match decides. Negative evidence (fp32 FMA) comes before the generic
# "this is a GEMM" rule, and positive evidence before both.
TC_RULES: list[TcRule] = [
    TcRule(_COMM, TC_NA, "communication kernel"),
    TcRule(_r(r"nvjet"), TC_YES, "Hopper cuBLASLt nvjet GEMM"),
    TcRule(_r(r"wgmma|gmma"), TC_YES, "Hopper warpgroup MMA (wgmma/gmma)"),
    TcRule(_r(r"tensorop"), TC_YES, "CUTLASS tensorop"),
    TcRule(_r(r"[hib]mma|dmma"), TC_YES, "MMA instruction in the name (hmma/imma/bmma/dmma)"),
    TcRule(_r(r"(?<!\d)(16816|16832|1688|884|8816)(?!\d)"), TC_YES, "MMA tile shape (16816/1688/884)"),
    TcRule(_r(r"flash|fmha|fused_attn|fused_attention|attention_kernel|xformers"), TC_YES,
           "flash/fused attention"),
    TcRule(_r(r"[hi]\d*cudnn|cudnn.*(?:f16|bf16|h16|fp16|tf32|int8)"), TC_YES, "tensor-core cuDNN kernel"),
    TcRule(
        _r(r"xmma.*(?:bf16|f16|h16|fp16|tf32|i8|int8|e4m3|e5m2|fp8)"),
        TC_YES,
        "xmma kernel on half/bf16/tf32/fp8 data",
    ),
    TcRule(_r(r"ffma|sgemm|gemmSN|scudnn|convolve_sgemm|winograd|wgrad_alg|dgrad_engine|dgrad2d"),
           TC_FALLBACK, "fp32 FMA matmul/convolution: no tensor-core path"),
    TcRule(_r(r"gemv|dot_kernel"), TC_NA, "matrix-vector: bandwidth bound, no tensor-core path expected"),
    # cuBLAS's split-K epilogue sums a GEMM's partial results; it only matched the generic rule
    # below through its argument type (cublasSplitKParams).
    TcRule(_r(r"splitKreduce|split_?k_?reduce"), TC_NA,
           "split-K reduction of GEMM partial sums: not a matmul"),
    TcRule(_r(r"gemm|matmul|conv(?:olution|_?\d?d)?_?(?:fwd|bwd|fprop|dgrad|wgrad|kernel)|implicit_gemm|"
              r"fprop|cublas"),
           TC_FALLBACK, "matmul/convolution with no tensor-core marker in the name"),
]


_FOLDED = {p: _folded(p) for p in [_MEMORY, *(r.pattern for r in TC_RULES)]}


def _search(p: re.Pattern, name: str, lowered: str | None) -> bool:
    """``p.search(name)``; through the folded pattern when ``lowered`` (the ASCII name, lower-cased) is given."""
    return (p.search(name) if lowered is None else _FOLDED[p].search(lowered)) is not None


def _lowered(name: str) -> str | None:
    return name.lower() if name.isascii() else None  # non-ASCII: Unicode case folding, the original patterns


def tensor_core_state(name: str) -> tuple[TcState, str]:
    """(state, reason) for a kernel name; ``TC_NA`` when no rule matches."""
    lowered = _lowered(name)
    for rule in TC_RULES:
        if _search(rule.pattern, name, lowered):
            return rule.state, rule.why
    return TC_NA, "not matmul/convolution"


def category(name: str) -> Category:
    lowered = _lowered(name)
    if _search(_COMM, name, lowered):
        return COMMUNICATION
    if _search(_MEMORY, name, lowered):
        return MEMORY
    return COMPUTE


class KernelKind(NamedTuple):
    """What a leaderboard row shows of a kernel from its name alone."""

    short_name: str
    family: str
    category: Category
    tc: TcState


def kinds_of(names: Iterable[str], short_names: Mapping[str, str]) -> list[KernelKind]:
    """The :class:`KernelKind` of each name (``short_names``: the export's own short names, by name)."""
    return [KernelKind(short_name(n, short_names.get(n)), family_key(n), category(n), tensor_core_state(n)[0])
            for n in names]
