"""Amdahl's law, apart from the leaderboard (which needs pandas) so renderers can use it without it."""

from __future__ import annotations


def amdahl(p: float, s: float = float("inf")) -> float:
    """Whole-run speed-up when a part with share p runs s× faster (s = inf: the ceiling 1/(1-p))."""
    if p >= 1:
        return float("inf")
    return 1.0 / (1.0 - p + (p / s if s != float("inf") else 0.0))
