"""What the store's read tests share (tests/store/reads): plain SQL over the same rows, and values compared as any
SQL client sees them."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
from datetime import UTC, datetime

from kbase.store.schema.records import (
    ACCEPTANCE_FIELDS,
    BASELINE_FIELDS,
    AcceptanceRecord,
    BaselineRecord,
)


def plain(url: str, sql: str, params: tuple = ()) -> list[tuple]:
    """``sql`` (``?`` parameters) as any SQL client runs it: sqlite3, or psycopg2 (``%s``)."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        try:
            return conn.execute(sql, params).fetchall()
        finally:
            conn.close()
    from helpers.pg import connected, execute

    with connected(url, timeout=10) as conn:
        return execute(conn, sql.replace("?", "%s").replace('"commit"', "commit"), params or None)


def value(v):
    """A plain SQL value as a record holds it: datetimes aware UTC (SQLite's text parsed), 0/1 as they are."""
    if isinstance(v, str) and len(v) >= 19 and v[4] == "-" and v[10] in " T" and v[13] == ":":
        v = datetime.fromisoformat(v)
    if isinstance(v, datetime):
        return v.replace(tzinfo=UTC) if v.utcoffset() is None else v.astimezone(UTC)
    return v


def same(a, b) -> bool:
    """Equal values (NaN equals NaN; a bool equals SQLite's 0/1)."""
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b


def as_plain(url: str, table: str, ids: list[int], fields: tuple[str, ...]) -> dict[int, dict]:
    cols = ", ".join(f'"{f}"' if f == "commit" else f for f in fields)
    marks = ", ".join("?" for _ in ids) or "NULL"
    rows = plain(url, f"SELECT {cols} FROM {table} WHERE id IN ({marks})", tuple(ids))
    return {r[0]: {f: value(v) for f, v in zip(fields, r)} for r in rows}


def records_are_rows(url: str, records: list, table: str = "baseline") -> None:
    """Each record equals its row as plain SQL reads it, field for field, with the record types."""
    fields = BASELINE_FIELDS if table == "baseline" else ACCEPTANCE_FIELDS
    rows = as_plain(url, table, [r.id for r in records], fields)
    for rec in records:
        assert isinstance(rec, BaselineRecord if table == "baseline" else AcceptanceRecord)
        got, want = dataclasses.asdict(rec), rows[rec.id]
        bad = [(f, got[f], want[f]) for f in fields if not same(got[f], want[f])]
        if table == "acceptance" and want["expires"] is not None:  # SQLite's DATE text
            bad = [b for b in bad if not (b[0] == "expires" and str(b[1]) == str(b[2]))]
        assert not bad, bad
        assert rec.created_at.tzinfo is not None and rec.created_at.utcoffset().total_seconds() == 0
