"""What a change costs: its effect on the iteration, paid on every GPU-hour of the fleet that runs the job.

A job that takes a fraction ``effect`` longer per iteration needs that fraction more GPU-hours for the same
work, so over a month it costs ``effect x gpus x 24 x 30.4 x price per GPU-hour`` more (a negative effect is
a saving). The field's own arithmetic: 8 H100s at about $1,300 a day (~$6.77 per GPU-hour) run 5,837
GPU-hours a month; 10% of that is about $3,950 a month.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

HOURS_PER_MONTH = 24 * 30.4  # an average month (365 / 12 days)


@dataclass(frozen=True)
class Pricing:
    """``[tool.kbase] gpu_hour_cost`` and ``gpus``: what one GPU-hour costs and how many GPUs run this job."""

    gpu_hour_cost: float
    gpus: int
    currency: str = "$"

    @property
    def gpu_hours_per_month(self) -> float:
        return self.gpus * HOURS_PER_MONTH

    def per_month(self, effect: float | None) -> float | None:
        """The cost per month of a change of ``effect`` (a fraction of the iteration; + slower, - faster)."""
        if effect is None or not math.isfinite(effect):
            return None
        return effect * self.gpu_hours_per_month * self.gpu_hour_cost

    def as_dict(self) -> dict[str, float | int | str]:
        return {"gpu_hour_cost": self.gpu_hour_cost, "gpus": self.gpus, "currency": self.currency,
                "gpu_hours_per_month": self.gpu_hours_per_month}


def iteration_effect(delta_ns: float | None, wall_ns: float | None) -> float | None:
    """A change of ``delta_ns`` kernel time per iteration per GPU as a fraction of the iteration (its GPU wall
    time ``wall_ns``): how much longer (or shorter) the job runs, the effect the diff states per kernel."""
    if delta_ns is None or wall_ns is None or not math.isfinite(delta_ns) or not math.isfinite(wall_ns) \
            or wall_ns <= 0:
        return None
    return delta_ns / wall_ns


@dataclass(frozen=True)
class ChangeCost:
    """What a comparison's change costs per month: ``effect`` is the change the diff judges real — the flagged
    kernels' effects summed (regressed, improved, new, gone; an algorithm swap nets out), else the total kernel
    time when the total rule flags it, else 0 (nothing beyond noise); ``total_*`` is all kernel time as
    measured, noise included."""

    pricing: Pricing
    basis: str  # "step time" | "flagged kernels" | "total kernel time" | "nothing beyond noise"
    effect: float
    per_month: float
    total_effect: float | None
    total_per_month: float | None

    def as_dict(self) -> dict[str, object]:
        return {**self.pricing.as_dict(), "basis": self.basis, "effect": self.effect, "per_month": self.per_month,
                "total_effect": self.total_effect, "total_per_month": self.total_per_month}


def change_cost(pricing: Pricing, flagged_effects: Iterable[float], total_delta_ns: float, wall_ns: float,
                total_flagged: bool, step_effect: float | None = None) -> ChangeCost:
    """``step_effect``: the step time's relative change when the step rule judged it real (regressed or improved):
    the job's own clock, so it is the basis whatever the kernels say (kernels can be flat while the step grew)."""
    effects = [e for e in flagged_effects if e is not None and math.isfinite(e)]
    total = iteration_effect(total_delta_ns, wall_ns)
    if step_effect is not None and math.isfinite(step_effect):
        basis, effect = "step time", step_effect
    elif effects:
        basis, effect = "flagged kernels", float(sum(effects))
    elif total_flagged and total is not None:
        basis, effect = "total kernel time", total
    else:
        basis, effect = "nothing beyond noise", 0.0
    return ChangeCost(pricing=pricing, basis=basis, effect=effect, per_month=pricing.per_month(effect) or 0.0,
                      total_effect=total, total_per_month=pricing.per_month(total))
