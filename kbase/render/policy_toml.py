"""The gate policy as TOML that pastes back into ``pyproject.toml`` (``kbase gate --show-policy``)."""

from __future__ import annotations

import json
import math
from typing import Any


def toml_value(v: Any) -> str:
    """A TOML literal: booleans, numbers, strings (JSON string escapes are valid TOML basic strings), arrays."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {type(v).__name__}")


def policy_toml(policy: dict[str, Any]) -> str:
    """``[tool.kbase.gate]`` with every threshold, and one ``[tool.kbase.gate.kernels."PATTERN"]`` table per
    per-kernel override."""
    lines = ["[tool.kbase.gate]"]
    for k, v in policy.items():
        if k != "kernels" and v is not None:
            lines.append(f"{k} = {toml_value(v)}")
    for pattern, over in (policy.get("kernels") or {}).items():
        lines += ["", f"[tool.kbase.gate.kernels.{toml_value(pattern)}]"]
        lines += [f"{k} = {toml_value(v)}" for k, v in over.items()]
    return "\n".join(lines) + "\n"
