"""Stored rows as plain, read-only records: what every read of the store returns (``reader.StoreReader``) and
what a write returns of the row it stored. The SQLModel classes (``kbase.store.schema.models``) define the tables
and the migrations; a reading command never imports them (SQLAlchemy and SQLModel: ~0.4 s). Field names
equal the models' columns; tests keep them so. One record type per table read: ``BaselineRecord``,
``AcceptanceRecord``."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, date, datetime
from typing import Any

from kbase.errors import StoreError


class Unreadable(StoreError):
    """A stored value that does not read as its column's type (a damaged or hand-edited row): one line, exit 2."""

    def __init__(self, what: str) -> None:
        super().__init__(f"store: a stored value does not read ({what})")


@dataclass(frozen=True)
class BaselineRecord:
    """One ``baseline`` row, field for field as ``kbase.store.schema.models.Baseline`` (a test keeps the names
    equal), read-only. Datetimes are aware UTC, as ``UTCDateTime`` returns them."""

    id: int | None
    created_at: datetime
    workload: str
    commit: str
    commit_date: datetime | None
    branch: str
    detached: bool
    dirty: bool
    source_name: str
    source_sha256: str
    source_size: int
    source_format: str
    source_mtime_ns: int | None
    source_probe: str | None
    exporter_version: str
    gpu_models: str
    gpu_count: int
    host: str
    window_spec: str
    window_desc: str
    marker: str
    aligned: bool
    warmup_skipped: int
    iterations_used: int
    iteration_keys: str
    window_ns: int
    window_gpu_ns: int
    total_kernel_ns: int
    compute_ns: int
    communication_ns: int
    memory_ns: int
    step_wall_ns: float | None
    fingerprint: str
    summary_json: str
    kbase_version: str
    capture_copy: int
    tags: str
    note: str
    step_ns: float | None = None
    idle_ns: float | None = None
    kind: str = "snapshot"
    capture_span: str | None = None


BASELINE_FIELDS = tuple(f.name for f in fields(BaselineRecord))


@dataclass(frozen=True)
class AcceptanceRecord:
    """One ``acceptance`` row, field for field as ``kbase.store.schema.models.Acceptance``, read-only."""

    id: int | None
    workload: str
    pattern: str
    commit: str
    reason: str
    author: str
    created_at: datetime
    expires: date | None


ACCEPTANCE_FIELDS = tuple(f.name for f in fields(AcceptanceRecord))
# the columns of a ``baseline_kernels`` row, in the table's order (a test keeps them the model's)
KERNEL_ROW_FIELDS = ("baseline_id", "format", "kernels", "kernel_ids", "levels", "board", "samples", "sketches", "ops",
                     "op_ids")
_DATETIMES = ("created_at", "commit_date")
_BOOLS = ("detached", "dirty", "aligned")


def utc_datetime(value: Any) -> datetime | None:
    """A stored datetime, aware in UTC (SQLModel's ``UTCDateTime``: naive means UTC): SQLite's ISO text, or
    the datetime psycopg2 returns (``timestamptz``, in the session's time zone)."""
    if value is None:
        return None
    if type(value) is str and len(value) == 26 and value[10] == " " and value[19] == "." and value[20:].isdigit():
        # SQLite's naive text (what kbase writes): parsed once, as UTC (``kbase history`` reads 20,000)
        try:
            return datetime.fromisoformat(value + "+00:00")
        except ValueError:
            pass  # (not a date: refused below)
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, str):
        try:
            dt = datetime.fromisoformat(value)
        except ValueError:
            raise Unreadable(f"datetime {value!r}") from None
        if dt.tzinfo is None and len(value) > 10:  # naive: UTC, the offset parsed with the text. (A date alone:
            try:  # "2026-01-05+00:00" would read as the time 00:00 with no offset, naive: ``replace`` below.)
                return datetime.fromisoformat(value + "+00:00")
            except ValueError:
                pass
    else:
        raise Unreadable(f"datetime stored as {type(value).__name__}")
    return dt.replace(tzinfo=UTC) if dt.utcoffset() is None else dt.astimezone(UTC)


def _date(value: Any) -> date | None:
    """A stored date: SQLite's 'YYYY-MM-DD' (SQLAlchemy's SQLite DATE), or psycopg2's ``date``."""
    if value is None or (isinstance(value, date) and not isinstance(value, datetime)):
        return value
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise Unreadable(f"date {value!r}") from None


def baseline_record(row: tuple) -> BaselineRecord:
    values = dict(zip(BASELINE_FIELDS, row))
    for k in _DATETIMES:
        values[k] = utc_datetime(values[k])
    for k in _BOOLS:
        values[k] = None if values[k] is None else bool(values[k])
    return BaselineRecord(**values)


def acceptance_record(row: tuple) -> AcceptanceRecord:
    values = dict(zip(ACCEPTANCE_FIELDS, row))
    values["created_at"] = utc_datetime(values["created_at"])
    values["expires"] = _date(values["expires"])
    return AcceptanceRecord(**values)


def baseline_of(row: Any) -> BaselineRecord:
    """The record of a baseline row a write holds (a ``models.Baseline``, a SQLAlchemy row): what reading it
    back returns."""
    return baseline_record(tuple(getattr(row, f) for f in BASELINE_FIELDS))


def acceptance_of(row: Any) -> AcceptanceRecord:
    """The record of an acceptance row a write holds (``models.Acceptance``), as ``baseline_of``."""
    return acceptance_record(tuple(getattr(row, f) for f in ACCEPTANCE_FIELDS))
