"""The gate's policy: thresholds with defaults, ``[tool.kbase.gate]`` settings and flag overrides.

``[tool.kbase.gate]`` example::

    fpr = 0.02                      # false-positive rate per comparison (split over the kernels tested)
    run_noise = 0.002               # run-to-run relative sd assumed when no history/repeat measures it
    min_effect_pct = 0.5            # practical significance: a regression fails only at >= this % of the iteration
    swap_run_noise = 0.01           # run-to-run relative sd assumed for an op whose kernels were swapped
    max_increase_pct = 0.0          # optional relative floor: a kernel must grow at least this much
    abs_floor_us = 2.0              # ... and at least this many µs per iteration per GPU
    share_floor = 0.005             # kernels under 0.5% of the iteration are never gated
    alpha = 0.05                    # significance level of the total-kernel-time rule
    min_history = 5                 # baselines needed before history noise is used
    history_baselines = 20          # how many past baselines history noise looks at
    history_ref = "origin/main"     # history noise from this branch's first-parent line (default: the
                                    # before side's line; gate --base-ref: the base ref's)
    new_kernel = "fail"             # "fail" | "warn": a new kernel above the share floor
    total_increase_pct = 3.0        # kernel time per iteration as a whole
    ignore = ["*memcpy*", "/^ncclDevKernel_.*/"]
    [tool.kbase.gate.kernels."*flash_fwd*"]
    max_increase_pct = 10.0
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

from kbase.errors import InputError, SettingsError

if TYPE_CHECKING:
    import numpy as np

    from kbase.analysis.cost import Pricing
    from kbase.analysis.safe_regex import SafeRegex

THRESHOLD_KEYS = ("max_increase_pct", "abs_floor_us", "share_floor", "alpha", "total_increase_pct", "fpr", "run_noise",
                  "min_effect_pct")
STEP_KEYS = ("step_run_noise", "step_max_mde_pct")  # the step rule's numbers (not per kernel)


@dataclass(frozen=True)
class Policy:
    max_increase_pct: float = 0.0  # relative floor (optional): the noise decides, not a fixed percentage
    abs_floor_us: float = 2.0
    share_floor: float = 0.005
    alpha: float = 0.05
    new_kernel: str = "fail"
    total_increase_pct: float = 3.0
    fpr: float = 0.02  # false-positive rate per comparison, Bonferroni-split over the kernels tested
    run_noise: float = 0.002  # run-to-run relative sd floor for within-capture noise sources
    # practical significance: a kernel's (or an op's) significant regression fails the gate only when its effect on
    # the iteration is at least this many percent; smaller ones are "below floor". The total
    # rule is separate. The default is calibrated (docs/noise-model.md "Practical significance").
    min_effect_pct: float = 0.5
    # the run-to-run sd assumed for the time of an op whose kernels were swapped (cuDNN/cuBLAS re-picked them),
    # when neither history nor repeat captures measure it: re-picking moves an op's time by ~1% between
    # processes (docs/noise-model.md "Swaps judged by op")
    swap_run_noise: float = 0.01
    # The step (docs/budget.md): the gate fails on a step-time regression (``step_gate``); the relative sd of one
    # capture's mean step time between processes assumed when neither repeat captures nor history measure it
    # (calibrated on the real A/A pairs); a step change whose minimum detectable effect is above
    # ``step_max_mde_pct`` and is not significant is "not judged".
    step_gate: bool = True
    step_run_noise: float = 0.07
    step_max_mde_pct: float = 10.0
    min_history: int = 5  # past baselines needed for history noise
    history_baselines: int = 20  # past baselines history noise looks at
    history_ref: str = ""  # the branch whose first-parent line history noise comes from ("": see above)
    swap_net_pct: float = 5.0  # algorithm swap: moved kernels net below this % of matmul/conv time
    min_iterations: int = 5  # per side, for the per-iteration rank test
    min_launches: int = 10  # per side, for the per-launch test
    unchanged_pct: float = 1.0  # below this a change is "unchanged"
    min_iteration_ratio: float = 0.5  # candidate with fewer iterations than this × baseline: incomparable
    # the unit of comparison: "" chosen from the captures, else "run", "window" or "iteration" (docs/diff.md)
    unit: str = ""
    # a kernel nothing could judge (too few launches, no history or repeats): "warn" lists it, "fail" fails on it
    cannot_judge: str = "warn"
    ignore: list[str] = field(default_factory=list)
    kernels: dict[str, dict] = field(default_factory=dict)  # pattern -> threshold overrides

    def as_dict(self) -> dict:
        return asdict(self)

    def for_kernel(self, name: str, short: str = "") -> Policy:
        """This policy with the first matching per-kernel override applied."""
        for pattern, over in self.kernels.items():
            if name_matches(pattern, name) or (short and name_matches(pattern, short)):
                return replace(self, **over)
        return self

    def ignored(self, name: str, short: str = "") -> bool:
        return any(name_matches(p, name) or (short and name_matches(p, short)) for p in self.ignore)

    def matches(self, pattern: str, names: Iterable[str], shorts: Iterable[str] | None = None) -> np.ndarray:
        """Vectorised ``name_matches`` over a column of names (or their short names)."""
        hit = pattern_mask(pattern, names)
        if shorts is not None:
            hit |= pattern_mask(pattern, shorts)
        return hit

    def ignored_mask(self, names: Sequence[str], shorts: Sequence[str] | None = None) -> np.ndarray:
        import numpy as np

        out = np.zeros(len(names), dtype=bool)
        for pattern in self.ignore:
            out |= self.matches(pattern, names, shorts)
        return out


@dataclass(frozen=True)
class ComparisonPolicy:
    """All the comparison is told of the settings (built once per command: ``comparison_policy``): the
    gate's thresholds, floors, noise fallbacks and patterns (``gate``), and the price of a GPU-hour on the fleet
    (``pricing``: every output states a change's cost per month; None: not stated). Nothing else of the settings
    reaches ``kbase.comparison``: the workload, the repository and the store are the reading side's
    (``api.comparing``)."""

    gate: Policy = field(default_factory=Policy)
    pricing: Pricing | None = None


def pattern_mask(pattern: str, names: Iterable[str]) -> np.ndarray:
    """Which of ``names`` match ``pattern``: ``name_matches`` over a column, the regex compiled once."""
    import numpy as np

    values = [str(n) for n in names]
    if len(pattern) >= 2 and pattern.startswith("/") and pattern.endswith("/"):
        regex = _regex(pattern)
        return np.fromiter((regex is not None and regex.search(n) for n in values), dtype=bool, count=len(values))
    match = re.compile(fnmatch.translate(pattern)).match  # translate() anchors at both ends, without backtracking
    return np.fromiter((match(n) is not None for n in values), dtype=bool, count=len(values))


def _regex(pattern: str) -> SafeRegex | None:
    """The linear-time matcher of a ``/regex/`` pattern (``analysis.safe_regex``); None for one it refuses
    (stored before patterns were checked so: it matches nothing rather than hang the gate)."""
    from kbase.analysis.safe_regex import UnsafePattern, compiled

    try:
        return compiled(pattern[1:-1])
    except UnsafePattern:
        return None


def name_matches(pattern: str, name: str) -> bool:
    """``/regex/`` searches (in linear time: ``analysis.safe_regex``); anything else is a glob on the whole name."""
    if len(pattern) >= 2 and pattern.startswith("/") and pattern.endswith("/"):
        regex = _regex(pattern)
        return regex is not None and regex.search(name)
    return fnmatch.fnmatchcase(name, pattern)


def check_pattern(p: str, where: str) -> None:
    """A pattern kbase can match: a non-empty glob, or a ``/regex/`` that ``re`` compiles and the linear-time
    matcher takes (no back-references, look-arounds, ``\\b``, inline flags)."""
    from kbase.analysis.safe_regex import UnsafePattern, compiled

    if not isinstance(p, str) or not p:
        raise InputError(f"{where}: pattern must be a non-empty string, got {p!r}")
    if p.startswith("/") and p.endswith("/") and len(p) >= 2:
        try:
            re.compile(p[1:-1])
        except (re.error, RecursionError, OverflowError) as exc:
            raise InputError(f"{where}: bad regex {p!r} ({exc})") from None
        try:
            compiled(p[1:-1])
        except UnsafePattern as exc:
            raise InputError(f"{where}: regex {p!r} cannot be matched in linear time: {exc}") from None


def _value_problem(key: str, value: object) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "must be a number"
    if not math.isfinite(value) or value < 0 or (key in ("alpha", "fpr") and not 0 < value < 1):
        return "out of range (alpha and fpr: between 0 and 1; others: finite and >= 0)"
    return None


def _check_value(key: str, value, where: str) -> float:
    problem = _value_problem(key, value)
    if problem:
        raise InputError(f"{where}: {key} {problem}, got {value!r}")
    return float(value)


def _check_flag(key: str, value: object) -> float:
    problem = _value_problem(key, value)
    if problem:
        raise SettingsError(problem, field=key, value=value)
    return float(value)  # type: ignore[arg-type]


CHOICES = {"new_kernel": ("fail", "warn"), "cannot_judge": ("warn", "fail"), "unit": ("", "run", "window", "iteration")}


def _choices(key: str) -> str:
    return ", ".join(repr(c) for c in CHOICES[key] if c) + (" (or \"\": automatic)" if "" in CHOICES[key] else "")


def load_policy(settings: dict | None = None, overrides: dict | None = None,
                where: str = "[tool.kbase.gate]") -> Policy:
    """Defaults, then ``[tool.kbase.gate]``, then command-line flags (None values ignored)."""
    p: dict = {"ignore": [], "kernels": {}}  # the values set, over the defaults: one frozen Policy at the end
    cfg = dict(settings or {})
    known = set(Policy.__dataclass_fields__)
    for key, value in cfg.items():
        if key not in known:
            raise InputError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")
        if key == "ignore":
            if not isinstance(value, list):
                raise InputError(f"{where}: ignore must be a list of patterns")
            for pat in value:
                check_pattern(pat, f"{where} ignore")
            p["ignore"] = list(value)
        elif key == "kernels":
            if not isinstance(value, dict):
                raise InputError(f"{where}: kernels must be a table of pattern = {{thresholds}}")
            for pat, over in value.items():
                check_pattern(pat, f"{where}.kernels")
                if not isinstance(over, dict) or not set(over) <= set(THRESHOLD_KEYS):
                    raise InputError(f"{where}.kernels.{pat!r}: only {', '.join(THRESHOLD_KEYS)} may be overridden")
                p["kernels"][pat] = {k: _check_value(k, v, f"{where}.kernels") for k, v in over.items()}
        elif key in CHOICES:
            if value not in CHOICES[key]:
                raise InputError(f"{where}: {key} must be one of {_choices(key)}, got {value!r}")
            p[key] = value
        elif key == "step_gate":
            if not isinstance(value, bool):
                raise InputError(f"{where}: step_gate must be true or false, got {value!r}")
            p["step_gate"] = value
        elif key == "history_ref":
            if not isinstance(value, str):
                raise InputError(f"{where}: history_ref must be a git revision (a string), got {value!r}")
            p["history_ref"] = value.strip()
        elif key in ("min_iterations", "min_launches", "min_history", "history_baselines"):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"{where}: {key} must be a positive integer")
            p[key] = value
        else:
            p[key] = _check_value(key, value, where)
    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key == "ignore":
            for pat in value:
                try:
                    check_pattern(pat, "pattern")
                except InputError as exc:
                    raise SettingsError(exc.message.removeprefix("pattern: "), field="ignore", value=pat) from None
            p["ignore"] = p["ignore"] + list(value)
        elif key in CHOICES:
            if value not in CHOICES[key]:
                raise SettingsError(f"must be one of {_choices(key)}", field=key, value=value)
            p[key] = value
        elif key == "history_ref":
            p["history_ref"] = str(value).strip()
        elif key == "step_gate":
            p["step_gate"] = bool(value)
        elif key not in THRESHOLD_KEYS + STEP_KEYS:
            raise SettingsError("not a policy setting", field=key, value=value)
        else:
            p[key] = _check_flag(key, value)
    return Policy(**p)
