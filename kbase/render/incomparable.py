"""What to do about an incomparable pair, in one sentence every surface shows beside the INCOMPARABLE verdict
(text, JSON reasons, Markdown comment, JUnit, the report): record the GPU of a capture that did not name it, or
judge the pair anyway."""

from __future__ import annotations

from kbase.comparison.diff import NO_KERNELS


def incomparable_hint(mismatches: list[str]) -> str | None:
    """What to do about an incomparable pair (None: comparable, or an empty candidate, which nothing overrides):
    record the GPU of a capture that did not name it, or judge the pair anyway."""
    if not mismatches or NO_KERNELS in mismatches:
        return None
    unknown = any(m.startswith("GPU model differs") and "unknown" in m.split(":", 1)[-1] for m in mismatches)
    record = ("a capture that does not name its GPU is stored as 'unknown': record it with kbase snapshot "
              "--gpu-model MODEL (or [tool.kbase] gpu_model, KBASE_GPU_MODEL); " if unknown else "")
    return f"{record}kbase gate --allow-incomparable (and kbase report --allow-incomparable) judges the pair anyway"
