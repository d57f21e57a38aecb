"""A screen table's column spec (``render.layout`` fits and prints it): apart from the layout, so a
module can declare its columns without loading rich (``kbase history --format json`` never draws one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    priority: int = 0  # 0: never dropped; larger numbers drop first
    min_width: int = 3  # a shrinkable column is never cut below this
    want_width: int | None = None  # columns of larger priority numbers drop before this one is cut below this
    max_width: int | None = None  # the default view cuts longer cells here (with an ellipsis)
    justify: Literal["left", "right"] = "right"
    shrink: bool = False  # may be cut (with an ellipsis) to fit: names and sentences
    keep_tail: bool = False  # cut in the middle so the end survives (a name's "#a1b2c3" id)
    tiebreak: str | None = None  # a row key holding an id, appended where cutting makes two cells look alike
    wide_only: bool = False  # a long text (a reason): shown with --wide only, never squeezed into a narrow table
