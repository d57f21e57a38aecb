"""``records.utc_datetime``: every stored datetime reads back aware, in UTC, whatever form its text takes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from kbase.store.schema.records import Unreadable, utc_datetime


@pytest.mark.parametrize(("text", "want"), [
    ("2026-01-05 09:00:00.000000", datetime(2026, 1, 5, 9, tzinfo=UTC)),  # what kbase writes to SQLite
    ("2026-01-05 09:00:00.123456", datetime(2026, 1, 5, 9, 0, 0, 123456, tzinfo=UTC)),
    ("2026-01-05T09:00:00", datetime(2026, 1, 5, 9, tzinfo=UTC)),
    ("2026-01-05 09:00", datetime(2026, 1, 5, 9, tzinfo=UTC)),
    ("2026-01-05", datetime(2026, 1, 5, tzinfo=UTC)),  # a date alone: midnight UTC, not a naive datetime
    ("20260105", datetime(2026, 1, 5, tzinfo=UTC)),
    ("2026-01-05 09:00:00+02:00", datetime(2026, 1, 5, 7, tzinfo=UTC)),
])
def test_text_reads_aware_in_utc(text, want):
    got = utc_datetime(text)
    assert got == want and got.tzinfo is UTC


def test_driver_datetimes_convert_to_utc():
    aware = datetime(2026, 1, 5, 11, tzinfo=timezone(timedelta(hours=2)))  # psycopg2: the session's zone
    assert utc_datetime(aware) == datetime(2026, 1, 5, 9, tzinfo=UTC) and utc_datetime(aware).tzinfo is UTC
    assert utc_datetime(datetime(2026, 1, 5, 9)).tzinfo is UTC
    assert utc_datetime(None) is None


@pytest.mark.parametrize("value", ["not a date", "2026-13-40", 12345, b"2026-01-05"])
def test_anything_else_is_unreadable(value):
    with pytest.raises(Unreadable):
        utc_datetime(value)
