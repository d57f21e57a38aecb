"""A screen table's column spec (``render.layout`` fits and prints it): apart from the layout, so a
module can declare its columns without loading rich (``kbase history --format json`` never draws one)."""

from __future__ import annotations

# Declared with the per-kernel columns (``analysis.columns``), which the leaderboard and diff tables read.
from kbase.analysis.columns import Column

__all__ = ["Column"]
