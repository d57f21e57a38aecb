"""Front door for the GPU time budget: ``kbase.budget(target)`` (a profile, ``@ID`` or a git revision)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbase.display import Shown
from kbase.errors import InputError
from kbase.settings import Settings

if TYPE_CHECKING:
    from kbase.analysis.budget import Budget
    from kbase.api.common import Progress


@dataclass(repr=False)
class BudgetResult(Shown):  # shows itself with render.notebook's formatters
    budget: Budget
    stored: bool  # from a stored baseline (per-iteration rows summed over GPUs) or computed from a profile
    source: dict[str, Any] = field(default_factory=dict)  # what it is of: file, or baseline id and commit

    def frame(self):
        """Per GPU and iteration (or per GPU for a stored or window budget), the blocks as a DataFrame."""
        import pandas as pd

        from kbase.render.budget import budget_doc

        doc = budget_doc(self.budget)
        rows = []
        for g in doc["gpus"]:
            its = g.get("iterations") or []
            base = {k: v for k, v in g.items() if k != "iterations"}
            rows += [base | it for it in its] if its else [base | {"iteration": None}]
        if self.stored:
            rows += [{"gpu": None, "rank": None, "label": "all GPUs"} | it for it in doc["iterations"]]
        return pd.DataFrame(rows)


def budget(target: Path | str, settings: Settings | None = None, *, window_all: bool = False,
           progress: Progress | None = None) -> BudgetResult:
    """The GPU time budget of ``target``: a profile file or per-rank folder (read -> window -> budget; with
    ``window_all`` each GPU's whole capture, as HTA's temporal breakdown), or ``@ID`` / a git revision (the
    budget stored with that baseline)."""
    from kbase.comparison.resolve import RefKind, parse_ref

    settings = settings or Settings.load()
    ref = parse_ref(str(target))
    if ref.kind == RefKind.PROFILE:
        from kbase.analysis.classify import kinds_of
        from kbase.analysis.leaderboard import budget_of
        from kbase.api.capture import read, window

        assert ref.path is not None
        profile = read(ref.path, settings, progress=progress)
        win = window(profile, settings)
        b = budget_of(win, kinds_of(profile.columns.names.tolist(), profile.short_names), whole=window_all)
        return BudgetResult(budget=b, stored=False, source={"file": str(ref.path)})
    if window_all:
        raise InputError("--window all needs the profile: a stored baseline keeps the window it was stored with",
                         field="window", value="all")
    from kbase.analysis.budget import budget_from_stored
    from kbase.api.capture import baseline

    got = baseline(str(target), settings)
    stored = got.leaderboard.summary.budget
    bid = got.baseline.id
    if not stored:
        raise InputError(f"baseline @{bid} was stored before kbase kept the GPU time budget: snapshot its "
                         "capture again to have one", field="target", value=str(target))
    return BudgetResult(budget=budget_from_stored(stored), stored=True,
                        source={"baseline": bid, "commit": got.baseline.commit, "workload": got.baseline.workload})
