"""Issue 40: reading a PostgreSQL store through psycopg2 (``kbase.store.read.connect``). What is PostgreSQL's alone:
the URL means what it means to SQLAlchemy (the write path), no read leaves a transaction open, a server that
accepts TCP but never answers fails within the configured timeout in psycopg2's words (one line, exit 2, the
password masked), Ctrl-C stops a hung connect at once, and every store that is not at the head schema (old,
foreign, empty, not there) answers as the write path would. That the reads give what plain SQL gives is held
in ``test_reads``.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time

import pytest

from kbase.store.read.connect import pg_connect_args

from helpers.cli import run_kbase
from helpers.library import downgraded


@pytest.mark.parametrize("url", [
    "postgresql+psycopg2://u@127.0.0.1:5432/db",
    "postgresql+psycopg2://u:p%40ss@h/db?sslmode=disable",
    "postgresql+psycopg2:///db?host=/run/postgresql",
    "postgresql+psycopg2://u:p@ss@h/db",  # two '@': whatever SQLAlchemy makes of it, this path makes too
    "postgresql+psycopg2://u:pa/ss@h/db",
    "postgresql+psycopg2://u:pa?ss@h/db",
    "postgresql+psycopg2://[::1]:6543/db?connect_timeout=3&application_name=kb",
    "postgresql+psycopg2://u@/db?host=a:1&host=b:2",
    "postgresql+psycopg2://u@/db?host=a,b&port=1,2",
    "postgresql+psycopg2://u@x:7/db?host=h:5433",
    "postgresql+psycopg2://",
])
def test_urls_are_read_as_sqlalchemy_reads_them(url):
    """``pg_connect_args`` gives psycopg2 what SQLAlchemy's psycopg2 dialect gives it for the write path; a
    psycopg (3) URL, as earlier kbase wrote them, names the same server."""
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url

    engine = create_engine(url)
    _, want = engine.dialect.create_connect_args(make_url(url))
    want = {k: v for k, v in want.items() if k not in ("context", "client_encoding")}
    assert pg_connect_args(url) == want
    assert pg_connect_args(url.replace("+psycopg2://", "+psycopg://")) == want
    engine.dispose()


def test_a_url_of_another_driver_or_a_bad_port_is_one_line():
    from kbase.errors import StoreError

    for url, what in (("postgresql+asyncpg://u:secret@h/db", "not a postgresql\\+psycopg2"),
                      ("postgresql+psycopg://u:secret@h:x/db", "port is not a number"),
                      ("postgresql+psycopg://u:secret@/db?host=a:1&host=b:2&port=3", "not both")):
        with pytest.raises(StoreError, match=what) as err:
            pg_connect_args(url)
        assert "secret" not in err.value.message


@pytest.fixture(scope="module")
def pg_store(tmp_path_factory, pg_copy_of) -> str:
    from kbase.store import open_store
    from kbase.synth.history import write_bulk_history

    url = f"sqlite:///{tmp_path_factory.mktemp('pgconnect') / 'kb.db'}"
    with open_store(url) as st:
        write_bulk_history(st.engine, 4, workload="bulk", n_kernels=6, iterations=4)
    return pg_copy_of(url)


def test_no_read_leaves_a_transaction_open(pg_store, capfd):
    """The read connection is autocommit; a store opened for writing reads on a connection of its engine's pool
    and ends each read's transaction (no lock held while it writes). A server's notices never reach the
    terminal."""
    from psycopg2.extensions import TRANSACTION_STATUS_IDLE
    from sqlalchemy import text

    from kbase.store import open_store

    from helpers.pg import execute

    with open_store(pg_store) as st, st.engine.begin() as conn:
        conn.execute(text("CREATE OR REPLACE FUNCTION kbase_test_notice() RETURNS int LANGUAGE plpgsql AS "
                          "$$ BEGIN RAISE NOTICE 'a notice'; RAISE WARNING 'a warning'; RETURN 1; END $$"))
    for readonly in (True, False):
        with open_store(pg_store, readonly=readonly) as st:
            assert [b.id for b in st.reader.list_baselines()] == [4, 3, 2, 1]
            assert st.reader.conn.autocommit is readonly
            assert st.reader.conn.get_transaction_status() == TRANSACTION_STATUS_IDLE
            assert execute(st.reader.conn, "SELECT kbase_test_notice()") == [(1,)]
    out, err = capfd.readouterr()
    assert "notice" not in out + err and "warning" not in out + err


def _foreign(url: str) -> str:
    from sqlalchemy import create_engine, text

    eng = create_engine(url)
    with eng.begin() as conn:
        conn.execute(text("CREATE TABLE notes (x int)"))
    eng.dispose()
    return url


@pytest.mark.parametrize("args", [["list"], ["show", "@2", "-f", "json"], ["history", "{name}", "-f", "csv"],
                                  ["steps", "--name", "bulk"], ["diff", "@1", "@2", "--name", "bulk"]])
def test_stores_not_at_head_answer_as_the_write_path(pg_url, pg_store, pg_copy_of, args):
    """An old schema is upgraded on use and read like the head copy; a foreign database is refused, an empty
    one is made a store, and a server that is not there is "cannot connect": one line, exit 2, the password
    masked."""
    from kbase.store import open_store

    from helpers.pg import create_database, free_port

    with open_store(pg_store, readonly=True) as st:
        name = st.reader.kernel_names()[0][0]
    argv = [a.format(name=name) for a in args]
    head = run_kbase(*argv, "--db", pg_store)
    old = run_kbase(*argv, "--db", downgraded(pg_copy_of(pg_store)))
    assert head.rc == 0 and (old.rc, old.stdout) == (head.rc, head.stdout), old
    foreign = run_kbase(*argv, "--db", _foreign(create_database(pg_url)))
    assert foreign.rc == 2 and foreign.stderr.count("\n") == 1 and "not a kbase store" in foreign.stderr, foreign
    empty = run_kbase(*argv, "--db", create_database(pg_url))
    assert "Traceback" not in empty.stderr and empty.stderr.count("\n") <= 1, empty
    nobody = f"postgresql+psycopg://kb:Secr3tPw@127.0.0.1:{free_port()}/db"
    r = run_kbase(*argv, "--db", nobody)
    assert r.rc == 2 and r.stderr.count("\n") == 1 and "cannot connect" in r.stderr, r
    assert "Secr3tPw" not in r.stderr and "kb:***@" in r.stderr


@pytest.fixture
def silent_server():
    """A port that accepts TCP connections (the kernel's backlog) and never answers them."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    try:
        yield s.getsockname()[1]
    finally:
        s.close()


def _kbase(*args: str, env: dict | None = None) -> subprocess.Popen:
    import os

    return subprocess.Popen([sys.executable, "-m", "kbase.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


@pytest.mark.slow
@pytest.mark.parametrize(("timeout", "url_timeout"), [("2", None), ("60", "3")])
def test_a_silent_server_fails_within_the_configured_timeout(silent_server, timeout, url_timeout):
    """``kbase list`` against a server that never answers: "connection timeout expired" after
    ``KBASE_CONNECT_TIMEOUT`` (or the URL's own ``connect_timeout``) seconds, once — one line, exit 2."""
    url = f"postgresql+psycopg://kb:Secr3tPw@127.0.0.1:{silent_server}/db"
    if url_timeout:
        url += f"?connect_timeout={url_timeout}"
    wait = float(url_timeout or timeout)
    t0 = time.monotonic()
    proc = _kbase("list", "--db", url, env={"KBASE_CONNECT_TIMEOUT": timeout})
    out, err = proc.communicate(timeout=wait + 30)
    took = time.monotonic() - t0
    assert proc.returncode == 2 and err.count("\n") == 1 and not out, err
    assert "cannot connect (connection timeout expired" in err and f"no answer in {url_timeout or timeout} s" in err
    assert "Secr3tPw" not in err and "Traceback" not in err
    assert wait <= took < wait + 4, took  # one wait, not one per connection attempt (the write path's too)


@pytest.mark.slow
@pytest.mark.parametrize("args", [["list"], ["diff", "@1", "@2"], ["snapshot", "x.sqlite", "--no-git", "--rev",
                                                                   "a" * 40]])
def test_ctrl_c_stops_a_hung_connect_at_once(silent_server, tmp_path, args):
    from helpers.tiny_export import make_tiny_export

    if args[0] == "snapshot":
        args = ["snapshot", str(make_tiny_export(tmp_path / "x.sqlite")), *args[2:]]
    proc = _kbase(*args, "--db", f"postgresql+psycopg://kb@127.0.0.1:{silent_server}/db",
                  env={"KBASE_CONNECT_TIMEOUT": "60"})
    time.sleep(3.0)  # (past the interpreter's start and the imports: waiting on the silent server)
    assert proc.poll() is None
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 2.0
    assert proc.returncode == 130 and "Traceback" not in err, err


@pytest.mark.slow
@pytest.mark.parametrize("args", [["list"], ["show", "@2"]])
def test_ctrl_c_stops_a_read_waiting_on_the_server_at_once(pg_store, args):
    """A read that waits on the server — here on a lock another session holds, as a migration's would — stops at
    Ctrl-C at once (every wait on the server is Python's), not when the server answers."""
    from helpers.pg import connected, execute

    with connected(pg_store) as holder:
        execute(holder, "BEGIN")
        execute(holder, "LOCK TABLE baseline IN ACCESS EXCLUSIVE MODE")
        proc = _kbase(*args, "--db", pg_store)
        time.sleep(3.0)  # (past the imports and the connect: waiting on the lock)
        assert proc.poll() is None
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 2.0
        execute(holder, "ROLLBACK")
    assert proc.returncode == 130 and "Traceback" not in err, err


@pytest.mark.slow
def test_snapshot_to_a_silent_server_waits_once(silent_server, tmp_path):
    """The identity lookup's connection fails: the snapshot says so and stops, without reading the file or
    waiting again for the write path's own connection."""
    from helpers.tiny_export import make_tiny_export

    export = make_tiny_export(tmp_path / "x.sqlite")
    t0 = time.monotonic()
    proc = _kbase("snapshot", str(export), "--no-git", "--rev", "a" * 40, "--db",
                  f"postgresql+psycopg://kb@127.0.0.1:{silent_server}/db", env={"KBASE_CONNECT_TIMEOUT": "2"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and err.count("\n") == 1 and "connection timeout expired" in err, err
    assert time.monotonic() - t0 < 6


@pytest.mark.slow
@pytest.mark.parametrize("args", [["db", "current"], ["db", "upgrade"]])
def test_schema_commands_to_a_silent_server_wait_once(silent_server, args):
    """``kbase db current`` / ``upgrade`` give the server ``KBASE_CONNECT_TIMEOUT`` as every command does, and
    wait once: the version table's read does not take an unreachable server for a store without one (it took
    ~21 s and ~4.8 s at a 2-second timeout: the default timeout, then a second connection)."""
    t0 = time.monotonic()
    proc = _kbase(*args, "--db", f"postgresql://kb@127.0.0.1:{silent_server}/db", env={"KBASE_CONNECT_TIMEOUT": "2"})
    out, err = proc.communicate(timeout=60)
    took = time.monotonic() - t0
    assert proc.returncode == 2 and err.count("\n") == 1 and "connection timeout expired" in err and not out, err
    assert 2 <= took < 4.5, took  # (two waits took 4.8 s)
