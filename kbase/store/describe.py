"""Looking at a store without changing it: ``describe_schema`` (``kbase db current``: Alembic's view of the
store's revision against this kbase's head), on read-only connections for SQLite (``schema.readonly``)."""

from __future__ import annotations

from pathlib import Path

from kbase.errors import StoreError
from kbase.store.engine import BUSY_TIMEOUT_S, _checked_stamp, alembic_config, make_engine, schema_state
from kbase.store.schema.errors import store_error
from kbase.store.schema.guard import check_sqlite_file, check_store_location
from kbase.store.schema.readonly import connect_store
from kbase.store_urls import mask_url, sqlite_path


def readonly_engine(url: str, path: Path, busy_timeout_s: float):
    """A SQLAlchemy engine on ``url``'s SQLite file whose every connection is ``connect_store``'s: the read
    commands' engine (no pragma that writes, no WAL switch, nothing created)."""
    from sqlalchemy import create_engine

    return create_engine(url.split("?", 1)[0], creator=lambda: connect_store(path, busy_timeout_s))


def describe_schema(url: str, busy_timeout_s: float | None = None, connect_timeout_s: float | None = None) -> str:
    """The store's schema revision against this kbase's head, without changing (or creating) anything
    (``kbase db current``: Alembic's view of the store, through SQLAlchemy); a PostgreSQL server gets
    ``connect_timeout_s`` (the settings') to answer, as every other command gives it."""
    path = sqlite_path(url)
    if path is not None:
        check_store_location(path)
    if path is not None and not path.exists():  # opening it would create the file (and its folder)
        from alembic.script import ScriptDirectory

        head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
        return f"{mask_url(url)}: revision (empty), head {head}: needs upgrade (no store yet; created on first use)"
    if path is not None:  # read-only connections: also a store on read-only media
        check_sqlite_file(path)
        engine = readonly_engine(url, path, BUSY_TIMEOUT_S if busy_timeout_s is None else busy_timeout_s)
    else:
        engine = make_engine(url, busy_timeout_s, connect_timeout_s)
    try:
        _checked_stamp(engine, url)
        current, head, known = schema_state(engine, url)
    except StoreError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise store_error(url, exc) from None
    finally:
        engine.dispose()
    state = "up to date" if current == head else ("NEWER than this kbase" if current and current not in known
                                                  else "needs upgrade")
    return f"{mask_url(url)}: revision {current or '(empty)'}, head {head}: {state}"
