"""A throwaway PostgreSQL server for the store tests.

``PgServer`` runs ``initdb`` and ``pg_ctl`` from ``pg_config --bindir`` on a free TCP port of
127.0.0.1, with trust authentication, its data directory and unix socket in a temporary directory,
and creates the database ``kbase_test``. PostgreSQL refuses to run as root: when the tests run as
root, the server runs as the ``postgres`` user (``runuser``, else ``su``) and the temporary
directory is handed to that user. ``stop()`` stops it (``-m immediate``) and removes the directory.

``create_database(admin_url)`` / ``drop_database(admin_url, name)`` give each test its own database.
The URLs are SQLAlchemy URLs (``postgresql+psycopg2://``); psycopg2 gets the plain ``postgresql://``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SKIP_REASON = "PostgreSQL server binaries not found (pg_config --bindir)"
READY_TIMEOUT_S = 30.0
SERVER_USER = "postgres"


class PgUnavailable(RuntimeError):
    """No PostgreSQL server can be started here (the tests that need one skip)."""


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or None."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                candidates.append(Path(out.stdout.strip()))
        except (OSError, subprocess.SubprocessError):
            pass
    # Debian/Ubuntu keep the server binaries out of PATH; pg_config may come from libpq-dev alone.
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for d in candidates:
        if (d / "initdb").is_file() and (d / "pg_ctl").is_file():
            return d
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def libpq_dsn(url: str) -> str:
    """SQLAlchemy URL -> libpq URL."""
    scheme, rest = url.split("://", 1)
    return "postgresql://" + rest if scheme.startswith("postgres") else url


def with_database(url: str, dbname: str) -> str:
    """``url`` pointing at another database (query string kept)."""
    scheme, rest = url.split("://", 1)
    query = ""
    if "?" in rest:
        rest, query = rest.split("?", 1)
        query = "?" + query
    host = rest.split("/", 1)[0]
    return f"{scheme}://{host}/{dbname}{query}"


@contextlib.contextmanager
def connected(url: str, timeout: float = 5.0) -> Iterator[Any]:
    """An autocommit psycopg2 connection to ``url`` (a SQLAlchemy URL), closed at the end."""
    import psycopg2

    conn = psycopg2.connect(libpq_dsn(url), connect_timeout=max(1, int(timeout)))
    try:
        conn.autocommit = True
        yield conn
    finally:
        conn.close()


def execute(conn: Any, sql: str, params: tuple | None = None) -> list[tuple]:
    """The rows of ``sql`` on a psycopg2 connection (none for a statement without a result)."""
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall() if cur.description is not None else []


def wait_ready(url: str, timeout: float = READY_TIMEOUT_S) -> None:
    """Retry connecting until the server answers (or raise after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with connected(url) as conn:
                execute(conn, "SELECT 1")
            return
        except Exception as exc:  # noqa: BLE001 - starting up, not yet listening, ...
            last = exc
            time.sleep(0.2)
    raise PgUnavailable(f"PostgreSQL at {url} not ready after {timeout:.0f} s: {last}")


def create_database(admin_url: str, prefix: str = "t_") -> str:
    """Create a fresh, uniquely named database on the server of ``admin_url``; return its URL."""
    name = f"{prefix}{uuid.uuid4().hex}"
    with connected(admin_url) as conn:
        execute(conn, f'CREATE DATABASE "{name}"')
    return with_database(admin_url, name)


def drop_database(admin_url: str, url: str) -> None:
    name = url.split("://", 1)[1].split("/", 1)[1].split("?", 1)[0]
    try:
        with connected(admin_url) as conn:
            execute(conn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    except Exception:  # noqa: BLE001 - best effort: the whole cluster goes away at session end
        pass


class PgServer:
    """One PostgreSQL cluster in a temporary directory; ``url`` once started."""

    def __init__(self, bindir: Path | None = None, dbname: str = "kbase_test") -> None:
        self.bindir = bindir or find_bindir()
        if self.bindir is None:
            raise PgUnavailable(SKIP_REASON)
        self.dbname = dbname
        self.tmp: Path | None = None
        self.port: int | None = None
        self.url: str | None = None
        self._as_other_user = os.geteuid() == 0

    # ----------------------------------------------------------------- running as the server user

    def _cmd(self, argv: list[str]) -> list[str]:
        if not self._as_other_user:
            return argv
        if shutil.which("runuser"):
            return ["runuser", "-u", SERVER_USER, "--", *argv]
        import shlex

        return ["su", SERVER_USER, "-s", "/bin/sh", "-c", shlex.join(argv)]

    def _run(self, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(self._cmd(argv), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, cwd=self.tmp)

    # ----------------------------------------------------------------- life cycle

    def start(self) -> str:
        if self._as_other_user:
            try:
                pw = pwd.getpwnam(SERVER_USER)
            except KeyError:
                raise PgUnavailable(
                    f"running as root and there is no {SERVER_USER!r} user to run PostgreSQL") from None
        self.tmp = Path(tempfile.mkdtemp(prefix="kbase-pg-"))
        data = self.tmp / "data"
        if self._as_other_user:
            os.chown(self.tmp, pw.pw_uid, pw.pw_gid)
        init = self._run([str(self.bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
                          "-E", "UTF8", "--no-sync", "--locale=C"], timeout=120)
        if init.returncode != 0:
            self.stop()
            raise PgUnavailable(f"initdb failed: {init.stderr.strip() or init.stdout.strip()}")
        last = ""
        for _attempt in range(5):  # the free port may be taken between probing and binding
            self.port = free_port()
            with open(data / "postgresql.auto.conf", "a") as fh:
                fh.write(
                    f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                    f"unix_socket_directories = '{self.tmp}'\nfsync = off\nsynchronous_commit = off\n"
                    "full_page_writes = off\nmax_connections = 100\nshared_buffers = 32MB\n"
                )
            log = self.tmp / "server.log"
            res = self._run([str(self.bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t",
                             str(int(READY_TIMEOUT_S)), "start"], timeout=READY_TIMEOUT_S + 30)
            if res.returncode == 0:
                break
            last = (log.read_text(errors="replace")[-2000:] if log.exists() else "") or res.stderr
            self._run([str(self.bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"])
        else:
            self.stop()
            raise PgUnavailable(f"pg_ctl start failed: {last.strip()}")
        admin = f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/postgres"
        try:
            wait_ready(admin)
            with connected(admin) as conn:
                execute(conn, f'CREATE DATABASE "{self.dbname}"')
        except Exception:
            self.stop()
            raise
        self.url = with_database(admin, self.dbname)
        return self.url

    def stop(self) -> None:
        if self.tmp is None:
            return
        data = self.tmp / "data"
        if (data / "postmaster.pid").exists():
            try:
                self._run([str(self.bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"])
            except (OSError, subprocess.SubprocessError):
                pass
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.tmp = None
        self.url = None

    def __enter__(self) -> PgServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def copy_store(src_url: str, dst_url: str) -> None:
    """Every row of the kbase store at ``src_url`` into the store at ``dst_url`` (migrated to the head first,
    empty), ids kept; PostgreSQL's id sequences are moved past them. The same store on another backend."""
    from sqlalchemy import text

    from kbase.store import open_store
    from kbase.store.schema.models import ACCEPTANCE, BASELINE, BASELINE_KERNELS, KERNEL_NAME, OP_NAME, WORKLOAD_KERNEL

    src, dst = open_store(src_url), open_store(dst_url)
    try:
        with src.engine.connect() as read, dst.engine.begin() as write:
            for table in (KERNEL_NAME, OP_NAME, BASELINE, BASELINE_KERNELS, WORKLOAD_KERNEL,
                          ACCEPTANCE):  # referenced first
                rows = [dict(r._mapping) for r in read.execute(table.select().order_by(*table.primary_key.columns))]
                if rows:
                    write.execute(table.insert(), rows)
                if write.dialect.name == "postgresql" and "id" in table.c:
                    write.execute(text(f"SELECT setval(pg_get_serial_sequence('{table.name}', 'id'), "
                                       f"coalesce(max(id), 0) + 1, false) FROM {table.name}"))
    finally:
        src.close()
        dst.close()
