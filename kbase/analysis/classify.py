"""What a kernel is, from its name alone: category, tensor-core state, and the family key.

The rules read the kernel's **own name** — the function's name without namespace, template arguments and
argument list (``void fbgemm_gpu::permute_2D_data_kernel<...>(...)`` -> ``permute_2D_data_kernel``) — so
that a namespace (``fbgemm``) or an argument type (``cublasLtEpilogue_t``) never reads as a GEMM. The
template arguments are read in three cases only, where they are the evidence:

- a *wrapper* kernel, whose own name says nothing (``cutlass::Kernel<cutlass_80_tensorop_s1688gemm…>``,
  ``cutlass::device_kernel<…GemmUniversal<…MainloopSm90TmaGmma…>>``, ``ck_tile::kentry<…>``): the wrapped
  type is the kernel;
- a matmul/convolution own name with no tensor-core marker: its data type (``float`` only -> an fp32
  matmul on the CUDA cores; ``half``/``bf16`` -> unknown);
- PyTorch's generic elementwise launchers: the functor says whether it is a copy or a fill (memory).

Tensor-core state (``docs/kernel-classification.md`` lists every rule): ``✓`` (``tc``) the name shows a
tensor-core path; ``⚠`` (``fallback``) a matmul/convolution that ran on the CUDA cores (fp32 SGEMM,
FFMA xmma, scudnn, convolve_sgemm, fp32 Winograd, legacy dgrad/wgrad engines, CUTLASS SIMT); ``-``
(``na``) not eligible, or no evidence either way — a false ``⚠`` sends an engineer after nothing, so
an unknown is ``-``. The labelled corpus ``tests/data/kernel_names.jsonl`` holds the expected answer
for 700+ real kernel names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kbase.analysis.guarded_regex import GuardedRegex
from kbase.analysis.names import WRAPPERS as _WRAPPERS
from kbase.analysis.names import family_key, own_name, qualified_own_name, short_name  # noqa: F401 - re-exported
from kbase.enums import TC_SYMBOL, Category, TcState  # noqa: F401 - TC_SYMBOL re-exported

COMPUTE = Category.COMPUTE
COMMUNICATION = Category.COMMUNICATION
MEMORY = Category.MEMORY

TC_YES = TcState.YES
TC_FALLBACK = TcState.FALLBACK
TC_NA = TcState.NA


@dataclass(frozen=True)
class TcRule:
    """``pattern`` (lower case) searched in the lower-cased own name; ``fix``: what a ``⚠`` is fixed with
    (``gemm``, ``conv``, ``half``: fp16 data that missed the tensor cores), see ``analysis.prescription``."""

    pattern: GuardedRegex
    state: TcState
    why: str
    fix: str = ""


def _r(p: str, *needles: str) -> GuardedRegex:
    """A rule pattern, matched against the lower-cased own name; ``needles`` as :class:`GuardedRegex` has them, derived
    here when ``p`` is a plain alternation of words (``^gemv|^gemmk1|^dot_kernel``)."""
    assert p == p.lower(), p
    if not needles and _WORDS.fullmatch(p):
        needles = tuple(w.strip("^$") for w in p.split("|"))
    return GuardedRegex(p, needles or None)


_WORDS = re.compile(r"\^?\w+\$?(?:\|\^?\w+\$?)*")  # a plain alternation of words: each word is a needle


# Needles (see ``GuardedRegex``): one of them is in every match, a test proves it from the parsed pattern
_COMM = _r(r"^(?:nccl|rccl)|nvshmem|multimem_all_reduce|cross_device_reduce|(?:^|_)all_?(?:reduce|gather|to_?all)|"
           r"(?:^|_)reduce_?scatter|sendrecv", "nccl", "rccl", "nvshmem", "cross_device_reduce", "all", "scatter",
           "sendrecv")
_MEMORY = _r(r"copy|memcpy|memset|(?<!pre)fill|transpose|^(?:tensor_?)?permut(?:e|ation)(?:_?kernel)?$|tensor_?permut|"
             r"nchwtonhwc|nhwctonchw|reshape_and_cache|store_kvcache",
             "copy", "memcpy", "memset", "fill", "transpose", "permut", "nchwtonhwc", "nhwctonchw", "reshape_and_cache",
             "store_kvcache")
# Inductor pointwise kernels whose fused ops only copy or fill (``triton_poi_fused_copy_zeros_3``); a cast
# (``_to_copy``) or a fused clone/transpose stays compute, as the labelled corpus has them
_INDUCTOR_DATA_OPS = frozenset({"copy", "zeros", "zero", "fill", "full", "ones", "empty", "new", "like", "slice",
                                "select", "scatter", "view", "lift", "fresh"})
_CUTENSOR_MOVE = GuardedRegex(r"cutensor.*(?:permut|transpos)", ("cutensor",), re.I)  # cuTENSOR permutes: data movement
# Hopper/Blackwell matmuls that carry no matmul word: TMA descriptors in the signature and a generator that
# emits matmuls under other names (nvFuser's scheduler-less fusions, hand-written Triton) or an MMA-shaped tile
_TMA_ARG = GuardedRegex(r"TensorMap|CUtensorMap|tma_desc|TmaDescriptor", ("tensormap", "tma_desc", "tmadescriptor"),
                        re.I)
_TMA_GENERATOR = _r(r"^nvfuser_(?!pointwise|reduction|inner_|outer_|transpose|resize)|^triton_?(?!poi|red|per|for|spl)",
                    "nvfuser_", "triton")
_MMA_TILE = GuardedRegex(r"<\s*(?:\(int\))?(?:64|128|192|256)\s*,\s*(?:\(int\))?(?:64|128|192|256)\s*,\s*"
                         r"(?:\(int\))?(?:16|32|64|128)\b|\b(?:64|128|192|256)x(?:64|128|192|256)x(?:16|32|64|128)\b",
                         None)
# PyTorch's generic launchers: the functor in the template arguments is the operation.
_LAUNCHER = _r(r"elementwise_kernel|elementwise_kernel_manual_unroll|multi_tensor_apply_kernel")
_LAUNCHED_MEMORY = GuardedRegex(r"copy_kernel|copy_device_to_device|FillFunctor|fill_kernel|index_copy",
                                ("copy", "FillFunctor", "fill_kernel"))
_WRAPPED_TC = GuardedRegex(r"tensorop|gmma|umma|tcgen05|wmma|mfma|xdlops",
                           ("tensorop", "gmma", "umma", "tcgen05", "wmma", "mfma", "xdlops"), re.I)
_TRITON = _r(r"^triton_(?:(poi|red|per|for|spl)|tem)_|^triton__\d", "triton_")
_TRITON_TEMPLATE_MATMUL = _r(r"_(?:mm|bmm|addmm|baddbmm|convolution|flex_attention|flex_decoding)(?:_|$)",
                             "mm", "convolution", "flex_")
_MATMUL = _r(r"gemm|matmul|(?:^|_)bmm(?:_|$)|convolution|conv\d?d|convolve|fprop|dgrad|wgrad",
             "gemm", "matmul", "bmm", "conv", "fprop", "dgrad", "wgrad")
_TC_DTYPE = _r(r"bf16|bfloat16|f16|fp16|half|tf32|e4m3|e5m2|e2m1|fp8|fp4|mxf|int8|i8")
_HALF_ARGS = GuardedRegex(r"half|bfloat16|BFloat16|__nv_bfloat|Half|float_e[45]m|Float8|int8_t|tfloat32",
                          ("half", "Half", "loat", "int8_t"))  # "loat": bfloat16, BFloat16, float_e, Float8 ...
_FLOAT_ARGS = GuardedRegex(r"\bfloat\b(?!\d)", ("float",))
_F32 = _r(r"f32|fp32")

TC_RULES: list[TcRule] = [
    # not matmul work, although the name says gemm/matmul/attention/conv
    TcRule(_r(r"^gemv|^gemmk1|^dot_kernel"), TC_NA,
           "matrix-vector (gemv/dot/K=1 GEMM): bandwidth bound, no tensor-core path"),
    TcRule(_r(r"splitkreduce|reducesplitk|split_k_reduce"), TC_NA,
           "split-K reduction of GEMM partial sums: not a matmul"),
    TcRule(_r(r"depthwise|im2col|col2im"), TC_NA,
           "depthwise convolution / im2col: bandwidth bound, no tensor-core path"),
    TcRule(_r(r"offsets|_helper$|^scalepacked"), TC_NA, "cuDNN helper (offsets, scaling, reduction): not a matmul"),
    TcRule(_r(r"^flash_fwd_splitkv_combine|^flash_bwd_(?:dot_do_o|clear_dkvaccum|convert_dq|convert_dkv)|"
              r"flashattn(?:fwdcombine|bwdpreprocess|bwdpostprocess)|paged_attention.*reduce|finalize_matmul|"
              r"matmul_scatter", "flash", "paged_attention", "matmul"),
           TC_NA, "attention/matmul pre- or post-processing (combine, convert, scatter): no MMA"),
    # tensor-core evidence
    TcRule(_r(r"^nvjet"), TC_YES, "cuBLASLt nvjet GEMM (Hopper/Blackwell): tensor cores"),
    TcRule(_r(r"wgmma|gmma|umma|tcgen05"), TC_YES, "warpgroup/Blackwell MMA (wgmma/gmma/umma) in the name"),
    TcRule(_r(r"(?<!sub)tensorop|wmma", "tensorop", "wmma"), TC_YES, "CUTLASS tensorop/wmma kernel: tensor cores"),
    TcRule(_r(r"[hib]mma|dmma|qmma|mfma|xdlops|_xdl_|^cijk_.*_mi\d+x\d+|^igemm_.*gtcx",
              "hmma", "imma", "bmma", "dmma", "qmma", "mfma", "xdl", "cijk_", "igemm_"), TC_YES,
           "MMA instruction in the name (hmma/imma/mfma/xdlops, Tensile MI, MIOpen gtcx)"),
    TcRule(_r(r"(?<!\d)(?:16816|16832|1688|884|8816|161616)(?=gemm|fprop|dgrad|wgrad|cudnn|_)",
              "168", "884", "8816", "1616"), TC_YES,
           "MMA tile shape in the name (16816/1688/884): tensor cores"),
    TcRule(_r(r"^flash_(?:fwd|bwd)|^flashattn(?:fwd|bwd)|fmha|^attn_fwd$|unified_attention|^sage_fwd$|"
              r"flash_[fb]prop", "flash", "fmha", "attn_fwd", "unified_attention", "sage_fwd"), TC_YES,
           "flash/fused attention kernel: tensor-core MMA"),
    TcRule(_r(r"xmma.*_ffma|_ffma.*xmma", "_ffma"), TC_FALLBACK,
           "xmma GEMM with an FFMA (fp32 FMA) main loop: CUDA cores", "gemm"),
    TcRule(_r(r"xmma.*(?:bf16|f16|tf32|e4m3|e5m2|i8|int8|tensor\d)", "xmma"), TC_YES,
           "xmma kernel on bf16/fp16/tf32/fp8/int8 data"),
    # matmul/convolution on the CUDA cores
    TcRule(_r(r"(?:fp16|f16|half).*(?:sgemm|scudnn)|hgemm"), TC_FALLBACK,
           "fp16 matmul/convolution on the CUDA cores (sgemm/scudnn/hgemm kernel): missed the tensor cores", "half"),
    TcRule(_r(r"convolve_sgemm|scudnn|sfprop|sdgrad|swgrad|winograd|dgrad_engine|dgrad_alg\d|dgrad2d_alg|"
              r"wgrad_alg\d", "sgemm", "scudnn", "fprop", "grad"), TC_FALLBACK,
           "fp32 convolution on the CUDA cores (scudnn/convolve_sgemm/Winograd/legacy cuDNN engine)", "conv"),
    TcRule(_r(r"sgemm|cgemm|simt"), TC_FALLBACK, "fp32 GEMM on the CUDA cores (SGEMM/CGEMM/SIMT kernel)", "gemm"),
]
_MATMUL_TC_DTYPE = TcRule(_MATMUL, TC_YES, "matmul named for a tensor-core data type (bf16/fp16/fp8/tf32)")
_MATMUL_FP32 = TcRule(_MATMUL, TC_FALLBACK, "fp32 matmul/convolution (float data) with no tensor-core marker", "gemm")
_MATMUL_UNKNOWN = TcRule(_MATMUL, TC_NA,
                         "matmul/convolution without a data type or tensor-core marker in the name: unknown")
_TRITON_RULES = {
    "tem_mm": TcRule(_TRITON, TC_YES, "Inductor Triton template of a matmul/conv/attention: tl.dot on tensor cores"),
    "tem": TcRule(_TRITON, TC_NA, "Inductor Triton template whose name names no matmul: unknown"),
    "fused": TcRule(_TRITON, TC_NA,
                    "Inductor pointwise/reduction kernel: no tl.dot (op names in it are fusion origins)"),
}
_COMM_RULE = TcRule(_COMM, TC_NA, "communication kernel")
_NOT_MATMUL = TcRule(_MATMUL, TC_NA, "not matmul/convolution")


class Kind(NamedTuple):
    """A name's classification: category, tensor-core rule that decided (``rule.state``), own name."""

    category: Category
    rule: TcRule
    own: str


_SEEN: dict[str, Kind] = {}  # names already classified: the leaderboard's reasons ask again for the shown rows
_SEEN_MAX = 1 << 16


def classify(name: str, family: str | None = None) -> Kind:
    """Category and tensor-core rule of one kernel name (``family``: ``family_key(name)`` if at hand)."""
    kind = _SEEN.get(name)
    if kind is None:
        if len(_SEEN) >= _SEEN_MAX:
            _SEEN.clear()
        kind = _SEEN[name] = _classify(name, family)
    return kind


class _OwnFacts(NamedTuple):
    """What the lower-cased own name alone says, worked out once per own name: a profile's template instances
    share theirs (half of a real mix: ``vectorized_elementwise_kernel``, ``reduce_kernel``)."""

    decided: tuple[Category, TcRule] | None  # Triton or communication: the own name is the whole answer
    memory: bool  # it names data movement
    launcher: bool  # PyTorch's generic launcher: its functor may be a copy or a fill
    tma_generator: bool  # a matmul generator, should the arguments hold TMA descriptors
    rule: TcRule | None  # the tensor-core rule; None: a matmul whose data type only its arguments tell


_FACTS: dict[str, _OwnFacts] = {}  # of the own names of names classified directly
_WRAPPED_FACTS: dict[str, _OwnFacts] = {}  # of the types wrapper kernels wrap: nothing decided early


def _own_facts(low: str, cache: dict[str, _OwnFacts], wrapped: bool = False) -> _OwnFacts:
    """The facts of ``low``, remembered in ``cache``; ``wrapped``: a type a wrapper kernel wraps (its own name
    decides nothing early)."""
    if len(cache) >= _SEEN_MAX:
        cache.clear()
    decided = None if wrapped else _decided_by_own_name(low)
    if decided is not None:
        facts = cache[low] = _OwnFacts(decided, False, False, False, None)
    else:
        facts = cache[low] = _OwnFacts(None, _MEMORY.search(low) is not None, _LAUNCHER.search(low) is not None,
                                       _TMA_GENERATOR.search(low) is not None, _rule_of_own_name(low))
    return facts


def _decided_by_own_name(low: str) -> tuple[Category, TcRule] | None:
    m = _TRITON.search(low)
    if m:
        if m.group(1) or low.startswith("triton__"):  # Inductor names list their fused ops: the kind prefix decides
            return _inductor_category(low), _TRITON_RULES["fused"]
        return COMPUTE, _TRITON_RULES["tem_mm" if _TRITON_TEMPLATE_MATMUL.search(low) else "tem"]
    if _COMM.search(low):
        return COMMUNICATION, _COMM_RULE
    return None


def _rule_of_own_name(low: str) -> TcRule | None:
    for rule in TC_RULES:
        if rule.pattern.search(low):
            return rule
    if not _MATMUL.search(low):
        return _NOT_MATMUL
    if _TC_DTYPE.search(low):
        return _MATMUL_TC_DTYPE
    return None


def _classify(name: str, family: str | None) -> Kind:
    qualified = qualified_own_name(name, family)
    own = own_name(qualified)
    low = own.lower()
    if low in _WRAPPERS or qualified.endswith(("gemvx::kernel", "epilogue::impl::globalKernel")):
        return _classify_wrapped(name, qualified, low)
    facts = _FACTS.get(low) or _own_facts(low, _FACTS)
    if facts.decided is not None:
        return Kind(facts.decided[0], facts.decided[1], own)
    if _TMA_ARG.search(name) and (facts.tma_generator or _MMA_TILE.search(name)):
        return Kind(COMPUTE, _TMA_MATMUL, own)
    return Kind(_category(name, facts), _tc_rule(name, own, low, facts), own)


def _inductor_category(low: str) -> Category:
    """An Inductor pointwise kernel whose fused ops only copy, fill or permute data is memory work."""
    ops = [o for o in re.sub(r"_\d+$", "", low.removeprefix("triton_poi_fused")).split("_") if o]
    return MEMORY if low.startswith("triton_poi_fused") and ops and set(ops) <= _INDUCTOR_DATA_OPS else COMPUTE


def _category(name: str, facts: _OwnFacts) -> Category:
    if facts.memory or _CUTENSOR_MOVE.search(name[:2000]):
        return MEMORY
    if facts.launcher and _LAUNCHED_MEMORY.search(name):
        return MEMORY
    return COMPUTE


def _tc_rule(name: str, own: str, low: str, facts: _OwnFacts) -> TcRule:
    """The own name's rule, or for a matmul named with no data type, the data type of its arguments."""
    if facts.rule is not None:
        return facts.rule
    args = _args(name, own)
    if _HALF_ARGS.search(args):
        return _MATMUL_UNKNOWN
    if _FLOAT_ARGS.search(args) or _F32.search(low):
        return _MATMUL_FP32
    return _MATMUL_UNKNOWN


def _args(name: str, own: str) -> str:
    """The text after the own name (template arguments, then the argument list)."""
    at = name.find(own)
    return name[at + len(own):] if at >= 0 else ""


def _classify_wrapped(name: str, qualified: str, low: str) -> Kind:
    """A wrapper kernel (``cutlass::Kernel<X>``, ``device_kernel<X>``, ``kentry<…, X>``, cuBLAS'
    ``gemvx::kernel`` and ``epilogue::impl::globalKernel``): classified by what it wraps."""
    if qualified.endswith("gemvx::kernel"):
        return Kind(COMPUTE, TC_RULES[0], "kernel")
    if qualified.endswith("epilogue::impl::globalKernel"):
        return Kind(COMPUTE, _EPILOGUE, "globalKernel")
    inner, own = name, own_name(qualified)
    for _ in range(4):  # Kernel<enable_sm90_or_later<FlashAttnFwdSm90<...>>>: unwrap to the named type
        inner = _first_template_arg(inner, own)
        own = own_name(_mangled_first_class(inner) if name.startswith("_Z") else qualified_own_name(inner))
        if own.lower() not in _WRAPPERS and not own.startswith("enable_sm"):
            break
    wlow = own.lower()
    facts = _WRAPPED_FACTS.get(wlow) or _own_facts(wlow, _WRAPPED_FACTS, wrapped=True)
    kind = Kind(_category(inner, facts), _tc_rule(inner, own, wlow, facts), own)
    if kind.rule.state != TC_YES and _MATMUL.search(wlow + " " + inner[:4000].lower()) and _WRAPPED_TC.search(inner):
        return Kind(kind.category, _WRAPPED_TENSOROP, own)  # CUTLASS mainloops: MmaTensorOp, Sm90 Gmma, Umma
    return kind


_TEMPLATE_PUNCTUATION = re.compile(r"[<>(),]")


def _first_template_arg(name: str, own: str) -> str:
    """The text of the first template argument after ``own`` in ``name`` (mangled: all that follows)."""
    at = name.find(own)
    if at < 0:
        return name
    rest = name[at + len(own):]
    if name.startswith("_Z"):
        return re.sub(r"L[a-z]+\d+E", "", rest[1:] if rest.startswith("I") else rest)  # literals (Li2E) dropped
    if not rest.startswith("<"):
        return rest
    depth = 0
    for m in _TEMPLATE_PUNCTUATION.finditer(rest):  # the loop acts on these only: a long name has few of them
        i = m.start()
        ch = rest[i]
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
            if depth == 0:
                return rest[1:i].strip()
        elif ch == "," and depth == 1:
            head = rest[1:i].strip()
            if not head.isdigit() and not head.startswith("("):
                return head
            rest = "<" + rest[i + 1:]
            return _first_template_arg(rest, "")
    return rest[1:]


def _mangled_first_class(text: str) -> str:
    """The first class-like (capitalised) source name in mangled template arguments
    (``NS_4conv6kernel23ImplicitGemmConvolutionI…`` -> ``ImplicitGemmConvolution``)."""
    for length, rest in re.findall(r"(\d+)([A-Za-z_][A-Za-z_0-9]*)", text[:600]):
        word = rest[:int(length)]
        if word[:1].isupper():
            return word
    return text


_TMA_MATMUL = TcRule(_TMA_GENERATOR, TC_YES, "TMA descriptors and a matmul generator (nvFuser, Triton) or an MMA "
                     "tile in the name: a Hopper/Blackwell tensor-core matmul")
_EPILOGUE = TcRule(_r("globalkernel"), TC_NA, "cuBLASLt epilogue (bias/activation): elementwise")
_WRAPPED_TENSOROP = TcRule(_WRAPPED_TC, TC_YES,
                           "wrapped CUTLASS kernel with a tensor-core mainloop (TensorOp/Gmma/Umma)")


def tensor_core_state(name: str) -> tuple[TcState, str]:
    """(state, reason) for a kernel name."""
    rule = classify(name).rule
    return rule.state, rule.why


def category(name: str) -> Category:
    return classify(name).category


def is_matmul_like(name: str) -> bool:
    """Whether the kernel is matmul/convolution/attention work by its name (whatever its tensor-core state)."""
    rule = classify(name).rule
    return rule.state != TC_NA or rule is _MATMUL_UNKNOWN or rule is _TRITON_RULES["tem"]


class KernelKind(NamedTuple):
    """What a leaderboard row shows of a kernel from its name alone."""

    short_name: str
    family: str
    category: Category
    tc: TcState


def kinds_of(names: Iterable[str], short_names: Mapping[str, str]) -> list[KernelKind]:
    """The :class:`KernelKind` of each name (``short_names``: the export's own short names, by name)."""
    out = []
    for n in names:
        family = family_key(n)
        kind = classify(n, family)
        out.append(KernelKind(short_name(n, short_names.get(n)), family, kind.category, kind.rule.state))
    return out
