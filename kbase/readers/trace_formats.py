"""Which program wrote a Chrome trace-event file that is not a PyTorch profiler trace: said in the refusal, so a
TensorFlow or JAX trace is not mistaken for a CPU-only PyTorch capture."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# categories the PyTorch profiler (Kineto) writes, current and 2021 formats (lower case)
KINETO_CATEGORIES = frozenset({
    "cpu_op", "operator", "user_annotation", "gpu_user_annotation", "python_function", "cuda_runtime", "runtime",
    "cuda_driver", "kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset", "trace", "ac2g", "cuda_profiler_range",
    "overhead", "fwdbwd", "cpu_instant_event", "gpu_instant_event", "mtia_ccp_events",
})
KINETO_META = ("schemaVersion", "deviceProperties", "distributedInfo", "traceName", "baseTimeNanoseconds")
# process and thread names of the TensorFlow / JAX (XLA) profiler's trace viewer
_XLA_NAMES = ("/device:", "/host:", "TensorFlow Ops", "TensorFlow Name Scope", "XLA Ops", "XLA Modules",
              "Launch Stats", "Stream #")


def foreign_format(meta: Mapping[str, object], categories: Iterable[str], names: Iterable[str]) -> str | None:
    """What wrote the trace when nothing in it is the PyTorch profiler's (its metadata keys, its event
    categories); None when it looks like a PyTorch profiler trace. ``names``: process and thread names."""
    if any(k in meta for k in KINETO_META) or KINETO_CATEGORIES & {c.lower() for c in categories if c}:
        return None
    if any(any(mark in n for mark in _XLA_NAMES) for n in names):
        return "a TensorFlow/JAX profiler trace (trace-viewer format)"
    return "a Chrome trace-event file not written by the PyTorch profiler"
