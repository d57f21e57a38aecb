"""psycopg2 as kbase uses it, set up once per process (``use_psycopg2``) for every connection — the read
connection, a snapshot's, SQLAlchemy's:

- ``bytea`` is read as ``bytes``, as from sqlite3 (psycopg2's own default is a memoryview; SQLAlchemy makes bytes
  of either);
- every wait on the server is Python's (psycopg2's "green" wait callback, ``psycopg2.extras.wait_select`` with a
  deadline): Ctrl-C stops a hung connect or a long query at once (``select`` raises ``KeyboardInterrupt``; psycopg2
  then closes the connection), where libpq's own blocking wait would retry until the query ends. A connect waits
  the DSN's ``connect_timeout`` at most, all hosts together (libpq's non-blocking connect has no timeout of its
  own), then fails with ``NoAnswer``.

psycopg2 rather than psycopg 3: its import is ~0.02-0.04 s against ~0.1-0.18 s, most of a PostgreSQL
``kbase list``. Imported only where a PostgreSQL store is used.
"""

from __future__ import annotations

import select
import time
from typing import Any

import psycopg2
import psycopg2.extensions as ext

_CONNECTED = frozenset({ext.STATUS_READY, ext.STATUS_BEGIN, ext.STATUS_PREPARED})
_DONE: list[Any] = []  # the registered bytea typecaster, once set up


class NoAnswer(psycopg2.OperationalError):
    """The server did not complete the connection within the DSN's ``connect_timeout``."""


def use_psycopg2() -> None:
    """Set psycopg2 up as the module's docstring says (once per process)."""
    if _DONE:
        return

    def as_bytes(value: str | None, cur: Any) -> bytes | None:
        return None if value is None else bytes(psycopg2.BINARY(value, cur))

    bytea = ext.new_type(psycopg2.BINARY.values, "KBASE_BYTEA", as_bytes)
    ext.register_type(bytea)
    ext.set_wait_callback(_wait)
    _DONE.append(bytea)


def _wait(conn: Any) -> None:
    """psycopg2's wait callback: one connect, or one query, driven to its end."""
    deadline = None if conn.status in _CONNECTED else _connect_deadline(conn)
    while (state := conn.poll()) != ext.POLL_OK:
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            raise NoAnswer("connection timeout expired")
        fd = conn.fileno()
        if state == ext.POLL_READ:
            select.select([fd], [], [], left)
        elif state == ext.POLL_WRITE:
            select.select([], [fd], [], left)
        else:
            raise psycopg2.OperationalError(f"unexpected state from poll: {state}")


def _connect_deadline(conn: Any) -> float | None:
    seconds = ext.parse_dsn(conn.dsn).get("connect_timeout")
    try:
        return time.monotonic() + max(1, int(float(seconds))) if seconds else None
    except ValueError:
        return None  # (libpq refuses it itself)


def pg_rows(conn: Any, sql: str) -> list[tuple]:
    """The rows of ``sql`` on a psycopg2 connection (which has no ``execute`` of its own)."""
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchall()
