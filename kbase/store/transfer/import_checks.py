"""What an export file may hold, checked before anything of it is decoded or stored: export files come from a
git branch anyone who can push may write, so each is hostile until it checks out.

- ``strict_json``: JSON with no NaN/Infinity, nesting refused past ``MAX_DEPTH``;
- ``check_budget``: what decoding a baseline's blobs may allocate, from their headers alone (the payload as
  declared, every value widened to 8 bytes, the rows an all-zero column stands for), against the
  ``import_max_mb`` limit, per blob and per file; ``packed`` refuses a payload that decodes past its
  declared size, so the declared size is the actual bound;
- one schema for every stored value (``check_row``, ``check_names``, ``check_acceptance``, ``check_key``): the
  store's column types, lengths and nullability (the model's, which PostgreSQL enforces and SQLite does not),
  text SQL can hold (no NUL, valid UTF-8), integers in the column's range, finite floats, and the JSON
  columns' shapes (``summary_json``, ``iteration_keys``, ``tags``), so that a row imported into SQLite imports
  into PostgreSQL and every command that reads it back can.

Every failure is an ``ExportFileError`` saying what is wrong; the caller names the file.
"""

from __future__ import annotations

import json
from datetime import date, datetime
from typing import Any

MAX_DEPTH = 32  # the deepest nesting any kbase export file has is 4 (the header's names)
MB = 1 << 20
_INT32, _INT64 = (1 << 31) - 1, (1 << 63) - 1
KEY = ("workload", "commit", "source_sha256", "window_spec", "capture_copy")  # the store's capture key
ACCEPTANCE_FIELDS = ("workload", "pattern", "commit", "reason", "author", "created_at", "expires")


class ExportFileError(ValueError):
    """A file that is not a valid export file (the message says why; the caller names the file)."""


# ------------------------------------------------------------------------------------------ JSON


class _NotJsonNumber(Exception):
    pass


def _no_constant(name: str) -> Any:
    raise _NotJsonNumber(name)


def depth(doc: Any) -> int:
    """How deeply ``doc`` nests (a scalar: 0), without recursion."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            deepest = max(deepest, level)
            stack.extend((v, level + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


def _finite(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):  # 1e400: a literal past float's range reads as infinity
        raise _NotJsonNumber(text)
    return value


def strict_json(data: bytes | str, what: str = "JSON") -> Any:
    """``data`` parsed as strict JSON: NaN and Infinity refused (a number past float's range too: it would
    read as infinity), nesting refused past ``MAX_DEPTH``."""
    try:
        doc = json.loads(data, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise ExportFileError(f"{what} nested too deeply (more than {MAX_DEPTH} levels)") from None
    except _NotJsonNumber as exc:
        raise ExportFileError(f"{what} holds {exc}, which is not a number JSON allows") from None
    except ValueError as exc:
        raise ExportFileError(f"unreadable {what} ({exc})") from None
    if depth(doc) > MAX_DEPTH:
        raise ExportFileError(f"{what} nested too deeply (more than {MAX_DEPTH} levels)")
    return doc


# ------------------------------------------------------------------------------------------ decoding budget


def blob_cost(blob: bytes) -> int:
    """Bytes that decoding every column of ``blob`` may allocate, read from its header (``Packed.decode_cost``)."""
    from kbase.store.codec.packed import ZSTD, Packed

    if blob[3:4] == b"\x01" and blob[4:5] in (b"\x01", b"\x02"):  # format 1's deflate / LZMA2: the same header
        blob = blob[:4] + bytes([ZSTD]) + blob[5:]
    return Packed(blob).decode_cost()


def check_budget(blobs: dict[str, bytes | None], limit: int) -> None:
    """Refuse a baseline whose blobs would decode to more than ``limit`` bytes (one blob, or all together)."""
    from kbase.store.codec.packed import PackedError

    total = 0
    for name, blob in blobs.items():
        if blob is None:
            continue
        try:
            cost = blob_cost(blob)
        except PackedError as exc:
            raise ExportFileError(f"{name} blob unreadable ({exc})") from None
        total += cost
        if cost > limit or total > limit:
            raise ExportFileError(f"{name} blob would decode to {max(cost, total) / MB:,.0f} MiB or more, over the "
                                  f"import limit of {limit / MB:,.0f} MiB per file (import_max_mb; "
                                  f"{len(blob):,} bytes in the file: a decompression bomb, or raise the limit)")


# ------------------------------------------------------------------------------------------ values


def _text(value: Any, what: str, limit: int | None = None) -> str:
    if not isinstance(value, str):
        raise ExportFileError(f"{what} is not text")
    if "\x00" in value:
        raise ExportFileError(f"{what} holds a NUL character (a store cannot keep it)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ExportFileError(f"{what} is not valid Unicode (a lone surrogate)") from None
    if limit is not None and len(value) > limit:
        raise ExportFileError(f"{what} is {len(value)} characters, over the store's {limit}")
    return value


def _int(value: Any, what: str, top: int = _INT64, low: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ExportFileError(f"{what} is not an integer")
    if not (-top - 1 if low is None else low) <= value <= top:
        raise ExportFileError(f"{what} ({value}) is out of range")
    return value


def _float(value: Any, what: str) -> float:
    """A float column's value as it reads back from either store: a JSON float (an integer reads back as a
    float, another value than the file's digest covers), finite, not -0.0 (SQLite keeps it as 0.0)."""
    import math

    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ExportFileError(f"{what} is not a finite number")
    if isinstance(value, int):
        raise ExportFileError(f"{what} is an integer ({value}) where the store keeps a float (kbase writes "
                              f"{float(value) if abs(value) < 1 << 53 else 'a float'})")
    if value == 0 and math.copysign(1.0, value) < 0:
        raise ExportFileError(f"{what} is -0.0, which SQLite keeps as 0.0 (kbase writes 0.0)")
    return value


def _moment(value: Any, what: str, kind: type) -> None:
    """A time (``datetime``) or date as kbase writes it: ISO 8601, a time in UTC (``+00:00``), so that it reads
    back from either store as written (the content digest covers it as text)."""
    from datetime import UTC

    _text(value, what, 64)
    try:
        moment = date.fromisoformat(value) if kind is date else datetime.fromisoformat(value)
    except ValueError:
        raise ExportFileError(f"{what} is not an ISO 8601 {'time' if kind is datetime else 'date'}") from None
    if isinstance(moment, datetime):
        if moment.utcoffset() is None:
            raise ExportFileError(f"{what} has no time zone")
        try:
            canonical = moment.astimezone(UTC).isoformat()
        except OverflowError:
            raise ExportFileError(f"{what} ({value}) is out of range in UTC") from None
    else:
        canonical = moment.isoformat()
    if canonical != value:
        raise ExportFileError(f"{what} is not written as kbase writes it ({value!r}: {canonical!r})")


def _column_check(column: Any, value: Any, what: str) -> None:
    from sqlalchemy import BigInteger, Boolean, Date, DateTime, Float, Integer, String, TypeDecorator

    if value is None:
        if not column.nullable:
            raise ExportFileError(f"{what} is missing (null)")
        return
    t = column.type.impl_instance if isinstance(column.type, TypeDecorator) else column.type
    if isinstance(t, DateTime):
        _moment(value, what, datetime)
    elif isinstance(t, Date):
        _moment(value, what, date)
    elif isinstance(t, Boolean):
        if not isinstance(value, bool):
            raise ExportFileError(f"{what} is not true or false")
    elif isinstance(t, BigInteger):
        _int(value, what)
    elif isinstance(t, Integer):
        _int(value, what, _INT32)
    elif isinstance(t, Float):
        _float(value, what)
    elif isinstance(t, String):  # Text is a String without a length
        _text(value, what, getattr(column.type, "length", None))
    else:  # a column type this schema does not know: refuse rather than store it unchecked
        raise ExportFileError(f"{what}: no import check for {type(t).__name__} columns")


def _json_column(value: str, what: str, check: Any) -> None:
    doc = strict_json(value, what)
    if not check(doc):
        raise ExportFileError(f"{what} does not have the shape kbase writes")


def _summary_ok(doc: Any) -> bool:
    """A stored summary that ``stored_summary`` reads back: an object whose known fields have their types."""
    from dataclasses import fields

    from kbase.analysis.summary import LeaderboardSummary

    if not isinstance(doc, dict) or not all(isinstance(k, str) for k in doc):
        return False
    notes = doc.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        return False
    for f in fields(LeaderboardSummary):
        if f.name == "budget":
            from kbase.analysis.budget import stored_budget_ok

            if doc.get("budget") is not None and not stored_budget_ok(doc["budget"]):
                return False
        elif f.name in doc and not _typed(doc[f.name], str(f.type)):
            return False
    return True


def _typed(value: Any, annotation: str) -> bool:
    """``value`` fits a summary field's annotation (``int``, ``float | None``, ``list[str]`` ...)."""
    if value is None:
        return "None" in annotation
    base = annotation.replace(" | None", "")
    if base.startswith("list["):
        inner = base[5:-1]
        return isinstance(value, list) and all(_typed(v, inner) for v in value)
    if base == "bool":
        return isinstance(value, bool)
    if base == "int":
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= _INT64
    if base == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if base == "str":
        return isinstance(value, str)
    return False


JSON_COLUMNS = {
    "summary_json": _summary_ok,
    "iteration_keys": lambda d: isinstance(d, list) and all(isinstance(k, int) and not isinstance(k, bool)
                                                            and abs(k) <= _INT64 for k in d),
    "tags": lambda d: isinstance(d, list) and all(isinstance(t, str) for t in d),
}


def check_row(row: dict[str, Any]) -> None:
    """A baseline row (``jsonable_row``'s form) that the store takes and every reader reads back."""
    from kbase.store.schema.models import BASELINE

    for column in BASELINE.columns:
        if column.name == "id":
            continue
        what = f"baseline {column.name}"
        value = row.get(column.name)
        _column_check(column, value, what)
        if column.name in JSON_COLUMNS and value is not None:
            _json_column(value, what, JSON_COLUMNS[column.name])
    _span_ok(row)
    _window_fits(row["window_spec"], "baseline window_spec")


def _span_ok(row: dict[str, Any]) -> None:
    """``capture_span`` is the summary's (it is derived from it: the unit and history must not read two facts)."""
    from kbase.analysis.span import PROGRAM, RANGE, SLICE

    span = row.get("capture_span")
    if span is not None and span not in (PROGRAM, RANGE, SLICE):
        raise ExportFileError(f"baseline capture_span is {span!r}, not {PROGRAM!r}, {RANGE!r}, {SLICE!r} or null")
    summary = strict_json(row["summary_json"], "baseline summary_json") if row.get("summary_json") else {}
    if span != summary.get("capture_span"):
        raise ExportFileError("baseline capture_span differs from its summary_json's")


def _window_fits(value: str, what: str) -> None:
    """The window's description is in the capture key's unique index: PostgreSQL refuses an index entry past
    about 2.7 KB (SQLite takes any), so both stores take at most ``MAX_WINDOW_SPEC_BYTES`` of it."""
    from kbase.analysis.spec import MAX_WINDOW_SPEC_BYTES

    size = len(value.encode("utf-8"))
    if size > MAX_WINDOW_SPEC_BYTES:
        raise ExportFileError(f"{what} is {size:,} bytes, over the {MAX_WINDOW_SPEC_BYTES:,} a store's index keeps")


def check_names(names: Any, op_names: Any) -> None:
    """The header's kernel names ([name, family, short name, category, tc]) and op names ([key, op])."""
    from kbase.store.schema.models import KERNEL_NAME, OP_NAME

    if not isinstance(names, list):
        raise ExportFileError("names is not a list")
    cols = [KERNEL_NAME.c[c] for c in ("name", "family", "short_name", "category", "tc")]
    for i, n in enumerate(names):
        if not isinstance(n, list) or len(n) != 5:
            raise ExportFileError(f"names[{i}] is not a [name, family, short name, category, tc] list")
        for column, value in zip(cols, n, strict=True):
            _column_check(column, value, f"names[{i}] {column.name}")
    if not isinstance(op_names, list):
        raise ExportFileError("op_names is not a list")
    for i, n in enumerate(op_names):
        if not isinstance(n, list) or len(n) != 2:
            raise ExportFileError(f"op_names[{i}] is not an [op key, op] list")
        for column, value in zip((OP_NAME.c.key, OP_NAME.c.op), n, strict=True):
            _column_check(column, value, f"op_names[{i}] {column.name}")


def check_key(key: dict[str, Any], what: str) -> None:
    """A capture key (a baseline's or a tombstone's): the baseline columns it names, typed as the store keeps
    them (so that it is hashable and compares as the store's does)."""
    from kbase.store.schema.models import BASELINE

    for k in KEY:
        _column_check(BASELINE.c[k], key.get(k), f"{what} {k}")
    _window_fits(key["window_spec"], f"{what} window_spec")


def check_acceptance(doc: dict[str, Any]) -> None:
    """An acceptance's fields, typed as the store keeps them, its pattern one ``kbase accept`` takes."""
    from kbase.errors import InputError
    from kbase.policy import check_pattern
    from kbase.store.schema.models import ACCEPTANCE

    for k in ACCEPTANCE_FIELDS:
        _column_check(ACCEPTANCE.c[k], doc.get(k), f"acceptance {k}")
    try:  # the pattern `kbase accept` would take: a regex that hangs the gate is refused here as there
        check_pattern(doc["pattern"], "acceptance pattern")
    except InputError as exc:
        raise ExportFileError(str(exc)) from None
