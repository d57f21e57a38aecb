"""The one connection a store is read through: a DB-API connection — Python's ``sqlite3`` for a SQLite file,
psycopg2 for PostgreSQL — on which ``reader.StoreReader`` runs the generated statements (``read_sql``). No
SQLAlchemy, SQLModel or Alembic is imported for a store at the head schema (~0.4 s).

``open_read`` checks the store as the write path does, without changing it: a SQLite file that is not a kbase
store is refused untouched (``guard``), a damaged version table says so, and a store at an older schema is
first upgraded through Alembic as by any command (``engine.upgrade_to_read``; one that cannot be written says
so, naming its revision), one from a newer kbase is refused.

PostgreSQL: the URL is read as SQLAlchemy reads it (``pg_connect_args``: the write path's connections and
this one go to the same server, user and database), the connection is autocommit (no transaction is left
open between reads) and waits ``connect_timeout`` seconds at most (``Settings.connect_timeout_s``, unless
the URL names its own); psycopg2's own message says what failed, with the password masked
(``errors.store_error``). Every wait on the server is Python's (``pg_driver``), so Ctrl-C stops a hung connect or
a long query at once; ``bytea`` is read as ``bytes``, as from sqlite3.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Callable, Mapping
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, unquote

from kbase.errors import StoreError
from kbase.store.schema.errors import NoStoreError, store_error
from kbase.store.schema.guard import check_sqlite_file, check_stamp, check_store_location
from kbase.store.schema.schema_names import SQLITE_INTERNAL_TABLES, head_revision

# SQLAlchemy's own URL pattern (``sqlalchemy.engine.url._parse_url``): a URL means what it means to the write path
_URL = re.compile(r"""
    (?P<name>[\w\+]+)://
    (?:(?P<username>[^:/]*)(?::(?P<password>[^@]*))?@)?
    (?:(?:\[(?P<ipv6host>[^/\?]+)\]|(?P<ipv4host>[^/:\?]+))?(?::(?P<port>[^/\?]*))?)?
    (?:/(?P<database>[^\?]*))?
    (?:\?(?P<query>.*))?
    """, re.X)
PG_SCHEME = "postgresql+psycopg2"
PG_SCHEMES = (PG_SCHEME, "postgresql+psycopg")  # (psycopg 3's, as earlier kbase wrote it: the same server)
_LIST = re.compile(r"__\[POSTCOMPILE_(\w+)\]")  # an expanding IN list of the compiled text
_IN_LIST = re.compile(r"\bIN \(__\[POSTCOMPILE_(\w+)\]\)")  # the same, with its IN
_PLACEHOLDER = {"sqlite": ":{}", "postgresql": "%({})s"}  # named (sqlite3), pyformat (psycopg2)


def bind(sql: str, params: Mapping[str, Any], dialect: str) -> tuple[str, dict[str, Any]]:
    """The compiled text and parameters for the dialect's driver: on SQLite each list parameter becomes one
    parameter per value (as SQLAlchemy expands it; an empty list matches nothing) and a date is its ISO text
    (SQLAlchemy's SQLite DATE); on PostgreSQL ``x IN (list)`` becomes ``x = ANY(array)``, one parameter (psycopg2
    adapts and the server parses one value, not hundreds: ``kbase show`` of 500 kernels, 15 -> 2 ms)."""
    args = {k: v.isoformat() if dialect == "sqlite" and isinstance(v, date) else v for k, v in params.items()}
    if dialect == "postgresql":

        def as_array(m: re.Match) -> str:
            args[m.group(1)] = list(args[m.group(1)])
            return f"= ANY(%({m.group(1)})s)"

        sql = _IN_LIST.sub(as_array, sql)
    mark = _PLACEHOLDER[dialect]

    def expand(m: re.Match) -> str:
        key = m.group(1)
        values = args.pop(key)
        names = [f"{key}_{i}" for i in range(len(values))]
        args.update(zip(names, values))
        return ", ".join(mark.format(n) for n in names) or "NULL"

    return _LIST.sub(expand, sql), args


def driver_error(exc: Exception) -> bool:
    """Whether ``exc`` is the driver's (sqlite3's, psycopg2's): the store's problem, said in one line."""
    import sys

    psycopg2 = sys.modules.get("psycopg2")
    return isinstance(exc, sqlite3.Error) or (psycopg2 is not None and isinstance(exc, psycopg2.Error))


class NotAtHead(StoreError):
    """A store at another schema revision than this kbase's head, not upgraded for a read that may not change it;
    ``empty``: a database without any table yet (a store still to be created: nothing is stored)."""

    def __init__(self, url: str, empty: bool) -> None:
        from kbase.store_urls import mask_url

        super().__init__(f"store {mask_url(url)}: not at schema revision {head_revision()} (not upgraded here)")
        self.empty = empty


class ConnectError(StoreError):
    """The server could not be reached, or refused the connection (psycopg2's words, the password masked): a
    command that needs the store stops here rather than wait for a second connection to fail alike."""


def pg_connect_args(url: str) -> dict[str, Any]:
    """psycopg2's keyword arguments for a ``postgresql+psycopg2://`` URL (or psycopg 3's ``postgresql+psycopg://``,
    the same server), as SQLAlchemy's psycopg2 dialect gives them (``create_connect_args``: user, password, host,
    port, dbname, then every query parameter; several ``host``/``port`` values joined by commas). A URL it cannot
    read is a ``StoreError``."""
    from kbase.store_urls import mask_url

    m = _URL.match(url)
    if m is None or m.group("name") not in PG_SCHEMES:
        raise StoreError(f"store {mask_url(url)}: not a {PG_SCHEME}:// URL")
    parts = m.groupdict()
    out: dict[str, Any] = {}
    for key, name in (("username", "user"), ("password", "password"), ("database", "dbname")):
        if parts[key]:
            out[name] = unquote(parts[key])
    host = parts["ipv4host"] or parts["ipv6host"]
    if host:
        out["host"] = host
    if parts["port"]:
        try:
            out["port"] = int(parts["port"])
        except ValueError:
            raise StoreError(f"store {mask_url(url)}: the port is not a number") from None
    query: dict[str, list[str]] = {}
    for key, value in parse_qsl(parts["query"] or ""):
        query.setdefault(key, []).append(value)
    out.update({k: v[0] if len(v) == 1 else v for k, v in query.items()})
    hosts, ports = _hosts(query, url)
    if hosts:
        out["host"] = ",".join(hosts)
    if ports and any(ports):
        out["port"] = ",".join(ports)
    return out


def _hosts(query: dict[str, list[str]], url: str) -> tuple[list[str], list[str]]:
    """The hosts and ports of a URL's query, as SQLAlchemy splits them (``host=h1:p1&host=h2:p2``, or
    ``host=h1,h2&port=p1,p2``, or one ``host=h:p``)."""
    from kbase.store_urls import mask_url

    hosts, ports = query.get("host", []), query.get("port", [])
    paired = len(hosts) > 1 or (len(hosts) == 1 and not ports and ":" in hosts[0]
                                and re.fullmatch(r"[a-zA-Z0-9\-.]*(?::\d*)?", hosts[0]) is not None)
    if paired:
        if ports:
            raise StoreError(f"store {mask_url(url)}: give several hosts as host=h1:p1&host=h2:p2 or as "
                             "host=h1,h2&port=p1,p2, not both")
        pairs = [h.split(":", 1) if ":" in h else [h, ""] for h in hosts]
        return [h for h, _ in pairs], [p for _, p in pairs]
    return (hosts[0].split(",") if hosts else []), (ports[0].split(",") if len(ports) == 1 else ports)


def connect_timeout(args: dict[str, Any], seconds: float) -> int:
    """The seconds a connection may take: the URL's ``connect_timeout`` when it names one, else ``seconds``
    (whole seconds, as libpq counts them)."""
    try:
        return int(float(args["connect_timeout"]))
    except (KeyError, TypeError, ValueError):
        return max(1, math.ceil(seconds))


def pg_connect(url: str, connect_timeout_s: float) -> Any:
    """An autocommit psycopg2 connection to the store at ``url``; a ``StoreError`` (psycopg2's first line, the
    password masked) when it cannot be opened within the timeout."""
    from kbase.store_urls import mask_url

    try:
        import psycopg2

        from kbase.store.read.pg_driver import NoAnswer, use_psycopg2
    except ImportError:
        raise StoreError(f"store {mask_url(url)}: cannot be used (psycopg2 is not installed: pip install "
                         "'gpu-kbase[postgres]')") from None

    use_psycopg2()
    args = pg_connect_args(url)
    args["connect_timeout"] = timeout = connect_timeout(args, connect_timeout_s)
    try:
        conn = psycopg2.connect(**args)
    except NoAnswer as exc:
        why = f"{exc}: no answer in {timeout} s; KBASE_CONNECT_TIMEOUT, or connect_timeout in the URL, sets it"
        raise ConnectError(store_error(url, exc, why).message) from None
    except psycopg2.Error as exc:
        raise ConnectError(store_error(url, exc).message) from None
    conn.autocommit = True
    return conn


_PG_STAMP = ("SELECT version_num, (SELECT array_agg(tablename::text) FROM pg_catalog.pg_tables "
             "WHERE schemaname = current_schema()) FROM alembic_version")


_PG_ANY_TABLE = "SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = current_schema() LIMIT 1"


def pg_stamp(conn: Any) -> tuple[list[str] | None, set[str]]:
    """(the store's stamped revisions, None without a version table; the tables of its schema) in one round trip."""
    import psycopg2.errors

    from kbase.store.read.pg_driver import pg_rows

    try:
        rows = pg_rows(conn, _PG_STAMP)
    except psycopg2.errors.UndefinedTable:
        return None, set()
    tables = set(rows[0][1] or ()) if rows else set()
    return [str(r[0]) for r in rows], tables


def sqlite_stamp(conn: sqlite3.Connection) -> list[str] | None:
    """The stamped revisions of a SQLite store (None without a version table)."""
    try:
        return [str(r[0]) for r in conn.execute("SELECT version_num FROM alembic_version").fetchall()]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise


def open_read(url: str, busy_timeout_s: float, connect_timeout_s: float,
              upgrade: Callable[[list[str] | None], None] | None = None) -> Any:
    """A DB-API connection to the store at ``url`` (a SQLite file or PostgreSQL) at the head schema, opened for
    reading: upgraded first when older (``upgrade(stamped)``, the migrations' caller's; without it
    ``NotAtHead``). ``NoStoreError`` where a SQLite
    store does not exist (nothing is created), a ``StoreError`` (one line) for everything that cannot be read."""
    from kbase.store_urls import sqlite_path

    path = sqlite_path(url)
    try:
        if path is not None:
            return _sqlite(url, path, busy_timeout_s, upgrade)
        return _postgresql(url, connect_timeout_s, upgrade)
    except (sqlite3.Error, OSError) as exc:
        raise store_error(url, exc) from None


def _sqlite(url: str, path: Path, busy_timeout_s: float, upgrade: Callable[[list[str] | None], None] | None
            ) -> sqlite3.Connection:
    check_store_location(path)
    if not path.exists():
        raise NoStoreError(f"no store at {path} (nothing stored yet; a snapshot creates it)", path=path)
    conn, stamped, tables = _sqlite_at_head(url, path, busy_timeout_s)
    if conn is not None:
        return conn
    if upgrade is None:
        raise NotAtHead(url, empty=not tables - SQLITE_INTERNAL_TABLES)
    upgrade(stamped)
    conn, _, _ = _sqlite_at_head(url, path, busy_timeout_s)
    if conn is None:
        raise StoreError(f"store {path}: not at schema revision {head_revision()} after upgrading it")
    return conn


def _sqlite_at_head(url: str, path: Path, busy_timeout_s: float
                    ) -> tuple[sqlite3.Connection | None, list | None, set[str]]:
    """(a read-only connection to the SQLite store when it is at the head schema, else None; its stamp; its
    tables)."""
    from kbase.store.schema.readonly import connect_store

    tables = check_sqlite_file(path)  # (another application's file is refused before it is opened for reading)
    conn = connect_store(path, busy_timeout_s)  # read-only, also on read-only media
    try:
        stamped = sqlite_stamp(conn)
        check_stamp(url, stamped, lambda: tables)
    except BaseException:
        conn.close()
        raise
    if stamped == [head_revision()]:
        return conn, stamped, tables
    conn.close()
    return None, stamped, tables


def _postgresql(url: str, connect_timeout_s: float, upgrade: Callable[[list[str] | None], None] | None) -> Any:
    import psycopg2

    from kbase.store.read.pg_driver import pg_rows

    conn = pg_connect(url, connect_timeout_s)
    try:
        stamped, tables = pg_stamp(conn)
        check_stamp(url, stamped, lambda: tables)
        if stamped != [head_revision()]:
            if upgrade is None:
                raise NotAtHead(url, empty=stamped is None and not pg_rows(conn, _PG_ANY_TABLE))
            upgrade(stamped)
            if pg_stamp(conn)[0] != [head_revision()]:
                raise StoreError(f"store: not at schema revision {head_revision()} after upgrading it")
    except psycopg2.Error as exc:
        conn.close()
        raise store_error(url, exc) from None
    except BaseException:
        conn.close()
        raise
    return conn
