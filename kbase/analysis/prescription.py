"""What the field does about a ``⚠`` kernel (a matmul/convolution on the CUDA cores), keyed to the GPU.

The fix depends on the architecture: Volta and Turing have fp16 tensor cores only (AMP with fp16 and
GradScaler); Ampere and newer add bf16 and TF32, so an fp32 model reaches the tensor cores with one flag;
Hopper and Blackwell add fp8 (Transformer Engine). The GPU comes from the capture (``gpu_models``); when the
capture does not name it, the kernel's own name may (``volta_``, ``sm80_``…: the architecture the library
built it for, so the GPU is at least that).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

VOLTA, TURING, AMPERE, ADA, HOPPER, BLACKWELL = "volta", "turing", "ampere", "ada", "hopper", "blackwell"
_ORDER = [VOLTA, TURING, AMPERE, ADA, HOPPER, BLACKWELL]

# Per architecture, newest first: its GPUs' model names as CUPTI and the PyTorch profiler print them, and the
# kernel-name prefixes of libraries built for it (a GPU is at least the architecture its kernels were built for).
_ARCHS = [
    (BLACKWELL, r"\b(?:GB|B)(?:100|200|300)\b|RTX (?:PRO )?50\d0|Blackwell", r"(?:^|_)sm_?1[02]\d|sm100|blackwell"),
    (HOPPER, r"\b(?:GH|H)(?:100|200|800|20)\b", r"(?:^|_)sm_?90|hopper|nvjet"),
    (ADA, r"\bL(?:4|20|40S?)\b|RTX 40\d0|RTX \d000 Ada", r"(?:^|_)sm_?89"),
    (AMPERE, r"\bA(?:100|800|40|30|16|10G?|2)\b|RTX 30\d0|RTX A\d000|\bA\d000\b", r"(?:^|_)sm_?8[0-9]|ampere"),
    (TURING, r"\bT4\b|RTX 20\d0|TITAN RTX|Quadro RTX", r"(?:^|_)sm_?75|turing"),
    (VOLTA, r"V100|TITAN V\b|GV100", r"(?:^|_)sm_?70|volta"),
]
_MODELS = [(re.compile(model, re.I), arch) for arch, model, _ in _ARCHS]
_NAME_ARCH = [(re.compile(name, re.I), arch) for arch, _, name in _ARCHS]


def gpu_arch(gpu_models: Sequence[str] | str | None) -> str | None:
    """The architecture of the first GPU model that names one (``"NVIDIA H100 80GB HBM3"`` -> hopper)."""
    models = [gpu_models] if isinstance(gpu_models, str) else list(gpu_models or [])
    for model in models:
        for pattern, arch in _MODELS:
            if pattern.search(model or ""):
                return arch
    return None


def name_arch(name: str) -> str | None:
    """The architecture a kernel name says it was built for (``ampere_sgemm…``, ``sm80_xmma…``), if any."""
    for pattern, arch in _NAME_ARCH:
        if pattern.search(name):
            return arch
    return None


_AMP_FP16 = "fp16 autocast (torch.autocast('cuda', dtype=torch.float16) + GradScaler)"
_AMP_BF16 = "bf16 autocast (torch.autocast('cuda', dtype=torch.bfloat16))"
_TF32_MM = ("TF32: torch.backends.cuda.matmul.allow_tf32 = True "
            "(or torch.set_float32_matmul_precision('high'))")
_TF32_CONV = "TF32 convs: torch.backends.cudnn.allow_tf32 = True (PyTorch's default: check nothing turned it off)"
_CONV_LAYOUT = "channels_last (model.to(memory_format=torch.channels_last)); torch.backends.cudnn.benchmark = True"


def _dims(conv: bool) -> str:
    return "channels multiples of 8" if conv else "GEMM dims (M, N, K) multiples of 8"


def prescription(fix: str, gpu_models: Sequence[str] | str | None, name: str = "") -> str:
    """The fix for a ``⚠`` kernel: ``fix`` is the rule's kind (``gemm``: fp32 matmul, ``conv``: fp32
    convolution, ``half``: fp16 data that missed the tensor cores)."""
    arch = gpu_arch(gpu_models)
    known = arch is not None
    if arch is None:
        arch = name_arch(name)  # a lower bound only: an sm80 kernel also runs on a Hopper GPU
    if fix == "half":
        return ("fix: fp16 missed the tensor cores — pad GEMM dims (M, N, K) and conv channels to multiples of 8, "
                "use channels_last for convs and torch.backends.cudnn.benchmark = True")
    conv = fix == "conv"
    if arch in (VOLTA, TURING) and known:
        gpu = "V100" if arch == VOLTA else "Turing"
        text = f"fix on {gpu} (fp16 tensor cores only, no TF32/bf16): {_AMP_FP16}, {_dims(conv)}"
        return text + (f"; {_CONV_LAYOUT}" if conv else "")
    if arch in _ORDER[_ORDER.index(AMPERE):]:
        lead = "fix on Ampere or newer" if not known else f"fix on {arch.capitalize()}"
        text = f"{lead}: {_AMP_BF16}, or {_TF32_CONV if conv else _TF32_MM}; {_dims(conv)}"
        if conv:
            text += f"; {_CONV_LAYOUT}"
        if known and arch in (HOPPER, BLACKWELL) and not conv:
            text += "; fp8 (Transformer Engine) for the largest GEMMs"
        return text
    text = (f"fix: on Ampere or newer {_AMP_BF16} or {'TF32 (torch.backends.cudnn.allow_tf32)' if conv else _TF32_MM}; "
            f"on Volta/Turing {_AMP_FP16}; {_dims(conv)}")
    return text + (f"; {_CONV_LAYOUT}" if conv else "")


def tc_reason(name: str, tc: str, gpu_models: Sequence[str] | str | None = None) -> str:
    """Why a row has its tensor-core state, and for a ``⚠`` what to do about it. ``tc`` is the row's state
    (a stored row keeps the state of the kbase that stored it: where today's rules disagree, both are said)."""
    from kbase.analysis.classify import TC_FALLBACK, TC_SYMBOL, classify

    rule = classify(name).rule
    if rule.state != tc:
        return f"classified {TC_SYMBOL.get(tc, tc)} when stored; today's rules say {rule.state.symbol}: {rule.why}"
    if tc == TC_FALLBACK:
        return f"{rule.why}; {prescription(rule.fix, gpu_models, name)}"
    return rule.why
