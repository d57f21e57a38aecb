"""What an Nsight Systems export says of its capture: how it began and when its session ran. These are facts,
read as the export holds them; ``analysis.span`` decides from them (and the kernels) whether the capture spans
the whole program.

- ``META_DATA_CAPTURE`` (schemas 3.x): ``START_TRIGGER`` (``Immediate``: collection began when nsys launched the
  program; a capture range — ``cudaProfilerApi``, ``nvtx`` — or a hotkey names another), ``START_DELAY_MS``
  (``--delay``) and ``PROCESS_0:HOW_TO_ATTACH`` (``LaunchAnother``: nsys started the process itself). Older
  exports (2.x) have no such table: nothing is known of the trigger then.
- ``ANALYSIS_DETAILS(startTime, stopTime, duration)``: the session. Exports differ in the clock of the event
  timestamps (3.11-3.13 exports count from the session's start, so the events lie in ``[0, duration]`` while
  ``startTime`` is on another clock; others may be on ``startTime``'s clock): both readings are offered, and
  the decision keeps those that hold the capture's activity.
- ``StringIds``: a ``cudaProfilerStart``/``cudaProfilerStop`` (or driver ``cuProfilerStart``) name is interned
  once the program called it: the program marks its own capture range.
"""

from __future__ import annotations

import re
import sqlite3
from typing import Any

from kbase.readers.nsys_sql import columns_of

_SETTINGS = ("START_TRIGGER", "START_DELAY_MS", "PROCESS_0:HOW_TO_ATTACH")
_WORD = re.compile(r"[A-Za-z0-9_.:-]{1,40}\Z")  # a setting's value as the facts keep it; anything else: "other"
_MAX_NS = 1 << 62
_MAX_ROWS = 16  # rows of a settings or session table read (real exports hold one session, a setting once)


def capture_facts(conn: sqlite3.Connection, tables: set[str]) -> dict[str, Any]:
    """``{"format": "nsys", "trigger", "delay_ms", "attach", "profiler_range", "sessions"}``: the settings (None
    where the export does not say), whether the program called the profiler API, and the candidate session
    spans ``[[start, stop], ...]`` on the events' clock (empty: no session recorded)."""
    facts: dict[str, Any] = {"format": "nsys", "trigger": None, "delay_ms": None, "attach": None,
                             "profiler_range": False, "sessions": []}
    if "META_DATA_CAPTURE" in tables and {"name", "value"} <= columns_of(conn, "META_DATA_CAPTURE"):
        # (bounded: a hostile export's table of a million rows or a 1 GB value costs nothing here)
        for name, value in conn.execute("SELECT name, substr(value, 1, 64) FROM META_DATA_CAPTURE WHERE name IN "
                                        "(?, ?, ?) LIMIT ?", (*_SETTINGS, _MAX_ROWS)).fetchall():
            text = str(value).strip() if value is not None else ""
            if name == "START_DELAY_MS":
                facts["delay_ms"] = int(text) if text.isdigit() and len(text) < 12 else None
            else:
                key = "trigger" if name == "START_TRIGGER" else "attach"
                facts[key] = facts[key] or (text if _WORD.match(text) else "other")
    if "ANALYSIS_DETAILS" in tables and {"startTime", "stopTime", "duration"} <= columns_of(conn, "ANALYSIS_DETAILS"):
        sessions: list[list[int]] = []
        for start, stop, duration in conn.execute("SELECT startTime, stopTime, duration FROM ANALYSIS_DETAILS "
                                                  "LIMIT ?", (_MAX_ROWS,)):
            if _ns(start) and _ns(stop) and start < stop:
                sessions.append([start, stop])
            if _ns(duration) and duration > 0 and [0, duration] not in sessions:
                sessions.append([0, duration])
        facts["sessions"] = sessions
    if "StringIds" in tables and "value" in columns_of(conn, "StringIds"):
        facts["profiler_range"] = conn.execute(
            "SELECT 1 FROM StringIds WHERE value LIKE 'cudaProfilerSt%' OR value LIKE 'cuProfilerSt%' LIMIT 1"
        ).fetchone() is not None
    return facts


def _ns(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < _MAX_NS
