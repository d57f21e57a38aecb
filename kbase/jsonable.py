"""The one NaN/inf cleaner: turn kbase's values into strict JSON.

NaN and ±Infinity are not JSON (``JSON.parse``, GitHub's ``fromJSON`` and most non-Python
consumers reject them): they become ``null``. numpy scalars and arrays become Python numbers and
lists, dataclasses dicts, enums their values, dates ISO strings, paths strings.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from datetime import date, datetime
from enum import Enum
from itertools import repeat
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
    that a name with a lone surrogate (not encodable) turns the document into ASCII escapes.

    Indented, with one exception: a list of records (dicts) holds one record per line. Each record
    goes through json's C encoder (any ``indent`` switches CPython to the pure-Python one: 75 ms for a
    2,000-kernel diff, 0.25 s for a 10,000-baseline history). A value already made of JSON types is
    encoded as it is; ``clean`` runs only when the encoder refuses something (NaN, numpy, dataclasses)."""
    try:
        text = _encode(value, indent, ascii_only=False)
    except (ValueError, TypeError):
        value = clean(value)
        text = _encode(value, indent, ascii_only=False)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = _encode(value, indent, ascii_only=True)
    return json_safe(text)


# What json.dumps(ensure_ascii=False) leaves raw in strings (it escapes C0 itself; C0 outside strings is layout).
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff\ud800-\udfff]")


def json_safe(text: str) -> str:
    """JSON text (from ``json.dumps``) with the characters ``render.safe.inert`` escapes written as
    ``\\uXXXX`` (DEL, C1, bidi controls): they only occur inside strings there, so the document means the
    same and prints inert on a terminal."""
    if text.isascii() and "\x7f" not in text:  # nothing to escape (a C-speed scan, not the regex)
        return text
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _encode(value: Any, indent: int | None, ascii_only: bool) -> str:
    enc = json.JSONEncoder(ensure_ascii=ascii_only, allow_nan=False, separators=(", ", ": ")).encode
    return enc(value) if indent is None else _pretty(value, enc, " " * indent, 0)


def _pretty(value: Any, enc: Any, step: str, level: int) -> str:
    inner, outer = step * (level + 1), step * level
    if isinstance(value, dict) and value:
        if not all(isinstance(k, str) for k in value):
            raise TypeError("a key that is not a string")  # -> ``clean`` names it as json would
        items = [f"{inner}{enc(k)}: {_pretty(v, enc, step, level + 1)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + outer + "}"
    if isinstance(value, (list, tuple)) and value:
        if all(isinstance(v, dict) for v in value):  # records: one a line
            return "[\n" + _records_text(value, enc, inner) + "\n" + outer + "]"
        return "[\n" + ",\n".join(inner + _pretty(v, enc, step, level + 1) for v in value) + "\n" + outer + "]"
    return enc(value)


def _records_text(records: list | tuple, enc: Any, inner: str) -> str:
    """The records' JSON texts, each as ``enc`` writes it alone after ``inner``, one a line (joined by ``,\n``).
    Thousands of records (a history, a diff's kernels) take one call of the C encoder for the whole list, cut
    between records at ``}, {"<first key>": `` where every record begins with that key: that text cannot occur
    inside a string (its quote would be escaped), and one occurrence per boundary proves no record holds
    another; each cut becomes a line break (one ``str.replace``, no list of texts). Else one call a record."""
    first = next(iter(records[0]), None) if records else None
    # (every record's first key, or None for an empty one: taken in C, map over next(iter(record), None))
    if len(records) < 2 or not isinstance(first, str) or set(map(next, map(iter, records), repeat(None))) != {first}:
        return ",\n".join(inner + enc(r) for r in records)
    text = enc(list(records))
    head = "{" + enc(first) + ": "
    cut = "}, " + head
    if text.count(cut) != len(records) - 1:
        return ",\n".join(inner + enc(r) for r in records)
    return inner + text[1:-1].replace(cut, "},\n" + inner + head)
