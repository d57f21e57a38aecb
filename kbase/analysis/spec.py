"""What window to take of a profile: the window stage's input, kept free of numpy/pandas so that
settings and commands that never read a profile stay light to import."""

from __future__ import annotations

from dataclasses import dataclass

# A window's description (``WindowSpec.key``) is part of a baseline's unique capture key: PostgreSQL's index
# refuses an entry past about 2.7 KB where SQLite takes any, so every store takes at most this many bytes of it
# (the workload, commit and capture hash beside it take at most ~1.3 KB). Real ones: under 100.
MAX_WINDOW_SPEC_BYTES = 1024


@dataclass(frozen=True)
class WindowSpec:
    """Iterations by marker (default: auto-detected step ranges) or by kernel, a slice of them or a
    warm-up skip, or a time trim; optionally one GPU."""

    marker: str | None = None  # regex on annotation ranges
    iteration_kernel: str | None = None  # regex: a new iteration at each launch of a matching kernel
    iterations: str | None = None  # "A:B", positions among detected iterations
    warmup: int | None = None  # None: the default rule
    trim: tuple[float, float] | None = None  # seconds on the capture clock
    gpu: int | None = None
    # GPUs without step markers are left out (and noted) instead of refused. Not part of key(): the
    # loss shows in the window's GPU count, which comparability checks already.
    allow_missing_ranks: bool = False

    def key(self) -> str:
        """What must match for two windows to be comparable (part of the baseline fingerprint)."""
        parts = [
            f"marker={self.marker or 'auto'}",
            f"iteration_kernel={self.iteration_kernel or ''}",
            f"iterations={self.iterations or ''}",
            f"warmup={'default' if self.warmup is None else self.warmup}",
            f"trim={'' if self.trim is None else f'{self.trim[0]}:{self.trim[1]}'}",
            f"gpu={'' if self.gpu is None else self.gpu}",
        ]
        return ";".join(parts)
