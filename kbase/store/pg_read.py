"""The read-only path's PostgreSQL connection (``fast_read``): the statements' PostgreSQL text
(``read_sql``) sent through libpq, PostgreSQL's own client library, called through ctypes.

Why not psycopg (the SQLAlchemy path's driver, on the same libpq): importing it costs ~0.15 s of CPU
(logging, asyncio, importlib.metadata, its adapters), as much as a whole ``kbase list`` on SQLite; ctypes
and libpq load in a few milliseconds. The reads are few and of a few types, so each row comes back as one
JSON array (the statement's columns in ``json_build_array``, decoded by ``json`` in C), and the columns
``read_sql.KINDS`` marks are converted (floats, bytea), so the values equal the SQLAlchemy path's.

The connection takes the store URL as libpq does (``postgresql+psycopg://`` as ``postgresql://``; the
password from the URL, ``PGPASSWORD`` or ``~/.pgpass``), reads in read-only transactions, and reads only a
store at the head revision (one query of ``alembic_version``). Where libpq is not found, the URL is one
libpq could read otherwise than SQLAlchemy, the server cannot be reached or the schema is another,
``open_reader`` returns None and the SQLAlchemy path answers — and reports any problem with the password
masked: libpq's own messages are never shown.
"""

from __future__ import annotations

import ctypes
import json
import re
from collections.abc import Iterator, Mapping
from datetime import date
from functools import cache
from typing import Any

from kbase.store.fast_read import FastReader
from kbase.store.read_sql import KINDS, SQL
from kbase.store.records import Unreadable
from kbase.store.schema_names import head_revision
from kbase.store_urls import pg_conninfo as libpq_uri

_TEXT = SQL["postgresql"]
_PARAM = re.compile(r"%\((\w+)\)s|__\[POSTCOMPILE_(\w+)\]|%%")  # pyformat parameters and lists
CONNECT_TIMEOUT_S = 10  # as ``engine.make_engine`` gives psycopg
_CONNECTION_OK, _TUPLES_OK = 0, 2  # libpq's ConnStatusType and ExecStatusType values
# Session settings the decoding relies on: UTC timestamps, floats to the last bit, bytea as '\x' + hex.
_SETUP = ("SET TIME ZONE 'UTC'; SET extra_float_digits = 1; SET bytea_output = 'hex'; "
          "SET default_transaction_read_only = on; SELECT version_num FROM alembic_version")
_OID = {bool: 16, int: 20, float: 701, date: 1082}  # a parameter's type; text: 0, inferred by the server


class PgError(Exception):
    """A failed read (the caller falls back to the SQLAlchemy path, which reports it)."""


# --------------------------------------------------------------------------- libpq


def _candidates() -> Iterator[str]:
    """Where libpq may be: first the copy psycopg[binary] bundles (the library the SQLAlchemy path
    connects with; found without importing psycopg), then the system's."""
    import importlib.util
    from pathlib import Path

    try:
        spec = importlib.util.find_spec("psycopg_binary")
    except (ImportError, ValueError):
        spec = None
    for d in (spec.submodule_search_locations or []) if spec else []:
        for libs in (Path(d).parent / "psycopg_binary.libs", Path(d) / ".dylibs"):
            if libs.is_dir():
                yield from sorted(str(p) for p in libs.glob("libpq*"))
    yield from ("libpq.so.5", "libpq.5.dylib", "libpq.dll")


_QUIET = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)(lambda _arg, _message: None)


@cache
def libpq() -> ctypes.CDLL | None:
    """libpq with the signatures used here, or None where none loads."""
    p, s, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    strings = ctypes.POINTER(ctypes.c_char_p)
    signatures = {
        "PQconnectdbParams": (p, [strings, strings, i]), "PQstatus": (i, [p]), "PQfinish": (None, [p]),
        "PQsetNoticeProcessor": (p, [p, type(_QUIET), p]), "PQexec": (p, [p, s]),
        "PQexecParams": (p, [p, s, i, ctypes.POINTER(ctypes.c_uint), strings, ctypes.POINTER(i),
                             ctypes.POINTER(i), i]),
        "PQresultStatus": (i, [p]), "PQntuples": (i, [p]), "PQgetvalue": (s, [p, i, i]),
        "PQgetisnull": (i, [p, i, i]), "PQclear": (None, [p]),
    }
    for name in _candidates():
        try:
            lib = ctypes.CDLL(name)
            for fn, (res, args) in signatures.items():
                getattr(lib, fn).restype, getattr(lib, fn).argtypes = res, args
        except (OSError, AttributeError):
            continue
        return lib
    return None


class PgConnection:
    """One libpq connection: text queries whose rows are one value each."""

    def __init__(self, lib: ctypes.CDLL, handle: int) -> None:
        self.lib, self.handle = lib, handle

    @classmethod
    def connect(cls, uri: str) -> PgConnection | None:
        lib = libpq()
        if lib is None:
            return None
        # The URI's own settings override the timeout (keywords before it); the encoding is ours.
        items = [(b"connect_timeout", str(CONNECT_TIMEOUT_S).encode()), (b"dbname", uri.encode()),
                 (b"client_encoding", b"UTF8")]
        keys = (ctypes.c_char_p * (len(items) + 1))(*[k for k, _ in items], None)
        values = (ctypes.c_char_p * (len(items) + 1))(*[v for _, v in items], None)
        handle = lib.PQconnectdbParams(keys, values, 1)
        if not handle:
            return None
        if lib.PQstatus(handle) != _CONNECTION_OK:
            lib.PQfinish(handle)
            return None
        lib.PQsetNoticeProcessor(handle, _QUIET, None)  # libpq would print server notices on stderr
        return cls(lib, handle)

    def close(self) -> None:
        if self.handle:
            self.lib.PQfinish(self.handle)
            self.handle = 0

    def first_column(self, sql: str, values: list[bytes | None] | None = None,
                     oids: list[int] | None = None) -> list[bytes | None]:
        """The first column of every row of ``sql`` (text), with parameters ``$1..$n`` = ``values``."""
        lib = self.lib
        if values is None:
            res = lib.PQexec(self.handle, sql.encode())
        else:
            n = len(values)
            res = lib.PQexecParams(self.handle, sql.encode(), n, (ctypes.c_uint * n)(*(oids or [0] * n)),
                                   (ctypes.c_char_p * n)(*values), None, None, 0)
        try:
            if lib.PQresultStatus(res) != _TUPLES_OK:
                raise PgError("the query failed")
            get, null = lib.PQgetvalue, lib.PQgetisnull
            return [None if null(res, r, 0) else get(res, r, 0) for r in range(lib.PQntuples(res))]
        finally:
            lib.PQclear(res)


# --------------------------------------------------------------------------- the reader


def _text(value: Any) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return b"true" if value else b"false"
    if isinstance(value, int | float):
        return repr(value).encode()
    if isinstance(value, date):
        return value.isoformat().encode()
    if isinstance(value, str) and "\x00" not in value:  # libpq's strings end at NUL: psycopg refuses those
        return value.encode("utf-8", "surrogatepass")
    raise Unreadable(f"parameter of type {type(value).__name__}")


def bind(sql: str, params: Mapping[str, Any]) -> tuple[str, list[bytes | None], list[int]]:
    """The compiled text with ``$n`` parameters, their text values and type ids: each list parameter
    becomes one parameter per value (an empty list matches nothing), as SQLAlchemy expands it."""
    values: list[bytes | None] = []
    oids: list[int] = []

    def one(value: Any) -> str:
        values.append(_text(value))
        oids.append(_OID.get(type(value), 0))
        return f"${len(values)}"

    def sub(m: re.Match) -> str:
        if m.group(1):
            return one(params[m.group(1)])
        if m.group(2):
            return ", ".join(one(v) for v in params[m.group(2)]) or "NULL"
        return "%"

    return _PARAM.sub(sub, sql), values, oids


def decode(raw: list[bytes | None], kinds: str) -> list[tuple]:
    """Rows from their JSON arrays: floats as floats (JSON writes 1.0 as 1, NaN and infinities as text),
    bytea from its hex text; every other value is as JSON gives it (timestamps and dates as ISO text, which
    the records read as they read SQLite's)."""
    try:
        rows = json.loads(b"[" + b",".join(b"null" if r is None else r for r in raw) + b"]")
        floats = [i for i, k in enumerate(kinds) if k == "f"]
        blobs = [i for i, k in enumerate(kinds) if k == "x"]
        for row in rows:
            for i in floats:
                if row[i] is not None:
                    row[i] = float(row[i])
            for i in blobs:
                v = row[i]
                if v is not None:
                    if not v.startswith("\\x"):
                        raise ValueError("bytea not in hex")
                    row[i] = bytes.fromhex(v[2:])
    except (ValueError, TypeError, IndexError, AttributeError) as exc:
        raise Unreadable(f"a stored value does not decode ({type(exc).__name__})") from None
    return [tuple(r) for r in rows]


class PgReader(FastReader):
    """The store's reads on one read-only libpq connection."""

    errors = (PgError,)

    def __init__(self, conn: PgConnection) -> None:
        self.conn = conn

    def close(self) -> None:
        self.conn.close()

    def rows(self, statement: str, params: Mapping[str, Any]) -> list[tuple]:
        sql, values, oids = bind(_TEXT[statement], params)
        return decode(self.conn.first_column(sql, values, oids), KINDS[statement])


def open_reader(url: str) -> PgReader | None:
    """A read-only reader of the PostgreSQL store at ``url`` when this path may read it, else None."""
    uri = libpq_uri(url)
    conn = PgConnection.connect(uri) if uri else None
    if conn is None:
        return None
    try:
        found = conn.first_column(_SETUP)
    except PgError:
        found = []  # no alembic_version: not a store, or one still to create
    if found != [head_revision().encode()]:
        conn.close()
        return None  # older (to migrate) or newer (refused) schema, or none: the Alembic path says which
    return PgReader(conn)
