"""Stored rows as plain, read-only records: what the read-only path (``fast_read``) returns in
place of the SQLModel classes (``kbase.store.models``), so a reading command never imports SQLAlchemy or
SQLModel (~0.4 s). Field names and value types equal the models'; tests keep them so."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, date, datetime
from typing import Any


class Unreadable(Exception):
    """A stored value this path does not read as SQLAlchemy would: the caller falls back to that path."""


@dataclass(frozen=True)
class BaselineRecord:
    """One ``baseline`` row, field for field as ``kbase.store.models.Baseline`` (a test keeps the names
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
    """One ``acceptance`` row, field for field as ``kbase.store.models.Acceptance``, read-only."""

    id: int | None
    workload: str
    pattern: str
    commit: str
    reason: str
    author: str
    created_at: datetime
    expires: date | None


ACCEPTANCE_FIELDS = tuple(f.name for f in fields(AcceptanceRecord))
_DATETIMES = ("created_at", "commit_date")
_BOOLS = ("detached", "dirty", "aligned")


def utc_datetime(value: Any) -> datetime | None:
    """A stored datetime as SQLAlchemy's SQLite DATETIME (``fromisoformat``) and SQLModel's ``UTCDateTime``
    (naive means UTC) return it."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise Unreadable(f"datetime stored as {type(value).__name__}")
    try:
        dt = datetime.fromisoformat(value)
    except ValueError:
        raise Unreadable(f"datetime {value!r}") from None
    return dt.replace(tzinfo=UTC) if dt.utcoffset() is None else dt.astimezone(UTC)


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
    expires = values["expires"]
    if expires is not None:  # SQLAlchemy's SQLite DATE: 'YYYY-MM-DD'
        try:
            values["expires"] = date.fromisoformat(expires)
        except (TypeError, ValueError):
            raise Unreadable(f"date {expires!r}") from None
    return AcceptanceRecord(**values)
