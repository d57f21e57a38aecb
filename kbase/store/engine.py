"""Where the store lives and how it is opened, migrated and guarded.

URL resolution, first match wins: ``--db``, ``KBASE_DB``, ``[tool.kbase] db`` in the repository's
``pyproject.toml``, then ``.kbase/kbase.db`` at the git top level (or the current directory).
A plain path means SQLite; ``postgresql://`` is read as ``postgresql+psycopg://``.

SQLite runs in WAL mode with a busy timeout so parallel CI jobs can write at once. The schema is
Alembic's: a new database is upgraded to head on first use, an older one is upgraded, and one from
a newer kbase is refused untouched.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from kbase.errors import StoreError

BUSY_TIMEOUT_S = float(os.environ.get("KBASE_BUSY_TIMEOUT", "30"))
# The newest migration in migrations/versions (a test keeps it equal to Alembic's head). A store
# already at this revision is opened without importing Alembic (~0.3 s of every command).
HEAD_REVISION = "0003"


def mask_url(url: str) -> str:
    """The URL with any password replaced by ***, for messages."""
    return re.sub(r"(://[^:/@]+:)[^@]*@", r"\1***@", url)


def normalize_url(value: str, base: Path | None = None) -> str:
    if "://" not in value:
        p = Path(value).expanduser()
        if not p.is_absolute():
            p = (base or Path.cwd()) / p
        return f"sqlite:///{p}"
    if value.startswith("postgresql://") or value.startswith("postgres://"):
        return "postgresql+psycopg://" + value.split("://", 1)[1]
    return value


def resolve_url(db: str | None = None, repo: Path | None = None) -> str:
    from kbase.settings import find_project_root, load_tool_config

    if db:
        return normalize_url(db)
    env = os.environ.get("KBASE_DB")
    if env:
        return normalize_url(env)
    root = find_project_root(repo)
    cfg = load_tool_config(root)
    if cfg.get("db"):
        return normalize_url(str(cfg["db"]), root)
    return f"sqlite:///{root / '.kbase' / 'kbase.db'}"


def sqlite_path(url: str) -> Path | None:
    if url.startswith("sqlite:///"):
        return Path(url[len("sqlite:///"):])
    return None


def migrations_dir() -> Path:
    """The Alembic scripts ship inside the package (kbase/store/migrations), wheel or checkout."""
    here = Path(__file__).resolve().parent / "migrations"
    if not (here / "env.py").exists():
        raise StoreError("kbase installation is missing its migrations directory")
    return here


def alembic_config(url: str):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    cur.execute("PRAGMA foreign_keys = ON")
    try:
        cur.execute("PRAGMA journal_mode = WAL")
    except Exception:  # noqa: BLE001 - a read-only file cannot switch modes; reads still work
        pass
    cur.execute("PRAGMA synchronous = NORMAL")
    cur.close()


_ENGINES: list = []  # engines made by this process, closed by dispose_all() when a command ends


def dispose_all() -> None:
    while _ENGINES:
        _ENGINES.pop().dispose()


def make_engine(url: str):
    from sqlalchemy import create_engine, event

    path = sqlite_path(url)
    if path is not None:
        if path.exists() and path.is_dir():
            raise StoreError(f"store {path}: is a directory, not a database file")
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_S})
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        try:
            engine = create_engine(url, pool_pre_ping=True,
                                   connect_args={"connect_timeout": 10} if "postgresql" in url else {})
        except Exception as exc:  # noqa: BLE001 - bad dialect / missing driver
            raise StoreError(f"store {mask_url(url)}: cannot be used ({type(exc).__name__}: {exc})") from None
    _ENGINES.append(engine)
    return engine


def store_error(url: str, exc: Exception) -> StoreError:
    """Turn a driver error into one line a user can act on."""
    text = str(getattr(exc, "orig", exc)).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    where = mask_url(url)
    low = text.lower()
    if "readonly" in low or "read-only" in low or "attempt to write" in low:
        return StoreError(f"store {where}: database is read-only ({text})")
    path = sqlite_path(url)
    if path is not None and "unable to open" in low and path.is_file():
        # SQLite cannot open a WAL database it may not write (nor create -wal/-shm beside): say why.
        for p in (path, path.parent):
            if not os.access(p, os.W_OK):
                return StoreError(f"store {where}: database is read-only ({p} is not writable; {text})")
    if "locked" in low or "busy" in low:
        return StoreError(f"store {where}: database is locked by another writer (waited {BUSY_TIMEOUT_S:.0f} s)")
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return StoreError(f"store {where}: not a kbase database or corrupt ({text})")
    if "unable to open" in low:
        return StoreError(f"store {where}: cannot open the database file ({text})")
    if "connection" in low or "could not connect" in low or "password" in low or "timeout" in low:
        return StoreError(f"store {where}: cannot connect ({mask_url(text)})")
    return StoreError(f"store {where}: {mask_url(text)}")


@contextlib.contextmanager
def _schema_lock(engine, url: str):
    """Serialise migrations between processes (8 CI jobs opening a new store at once)."""
    path = sqlite_path(url)
    if path is not None:
        import fcntl

        lock_path = path.with_name(path.name + ".migrate-lock")
        try:
            fh = open(lock_path, "a+")
        except OSError:
            yield None  # read-only directory: nothing can migrate anyway
            return
        with fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield None
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)
        return
    from sqlalchemy import text

    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_lock(7164812)"))
        try:
            yield None
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(7164812)"))
            conn.commit()


def schema_state(engine, url: str) -> tuple[str | None, str, set[str]]:
    """(current revision or None, head revision, known revisions)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config(url))
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
    known = {rev.revision for rev in script.walk_revisions()}
    return current, script.get_current_head(), known


def _stamped_revision(engine) -> str | None:
    """The store's Alembic revision by a plain query (None when not stamped or unreadable)."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT version_num FROM alembic_version")).fetchall()
    except SQLAlchemyError:
        return None
    return rows[0][0] if len(rows) == 1 else None


def upgrade(engine, url: str, revision: str = "head") -> None:
    from alembic import command

    cfg = alembic_config(url)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def open_store(db: str | None = None, repo: Path | None = None, migrate: bool = True):
    """Engine for the resolved store, at the schema head (migrated if needed)."""
    from sqlalchemy.exc import SQLAlchemyError

    url = resolve_url(db, repo)
    engine = make_engine(url)
    try:
        if _stamped_revision(engine) == HEAD_REVISION:
            return engine, url
        current, head, known = schema_state(engine, url)
        if current is not None and current not in known:
            raise StoreError(
                f"store {mask_url(url)}: schema revision {current} comes from a newer kbase "
                f"(this one knows up to {head}); upgrade kbase — the database was not changed"
            )
        if migrate and current != head:
            with _schema_lock(engine, url):
                current, head, _ = schema_state(engine, url)
                if current != head:
                    upgrade(engine, url)
    except StoreError:
        engine.dispose()
        raise
    except (SQLAlchemyError, OSError) as exc:
        engine.dispose()
        raise store_error(url, exc) from None
    return engine, url
