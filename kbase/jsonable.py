"""The one NaN/inf cleaner: turn kbase's values into strict JSON.

NaN and ±Infinity are not JSON (``JSON.parse``, GitHub's ``fromJSON`` and most non-Python
consumers reject them): they become ``null``. numpy scalars and arrays become Python numbers and
lists, dataclasses dicts, enums their values, dates ISO strings, paths strings.
"""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import date, datetime
from enum import Enum
from pathlib import Path
from typing import Any


def clean(value: Any) -> Any:
    """A copy of ``value`` made only of JSON types, with NaN/inf as None."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, Enum):
        return clean(value.value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k.value if isinstance(k, Enum) else k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [clean(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: clean(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return clean(value.tolist())
    if hasattr(value, "item"):
        return clean(value.item())
    return str(value)


def dumps(value: Any, indent: int | None = 2) -> str:
    """Strict JSON text (``allow_nan=False`` proves no NaN slipped through). UTF-8 as is, except
    that a name with a lone surrogate (not encodable) turns the document into ASCII escapes."""
    doc = clean(value)
    text = json.dumps(doc, indent=indent, ensure_ascii=False, allow_nan=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = json.dumps(doc, indent=indent, ensure_ascii=True, allow_nan=False)
    from kbase.render.safe import json_safe  # DEL, C1 and bidi controls as \uXXXX: inert on a terminal

    return json_safe(text)
