"""What a store holds, to tell that a refused command left it exactly as it was, on either backend.

``store_state(url)``: for a SQLite store the file's bytes (None: no file: nothing was created), for a
PostgreSQL database every table of its ``public`` schema with all its rows, sorted (``{}``: no tables: no
store was created there); two states compare equal when nothing changed. ``commits_left(url)``: the commits
of the stored baselines."""

from __future__ import annotations

from pathlib import Path


def _sqlite_path(url: str) -> Path | None:
    return Path(url.removeprefix("sqlite:///")) if url.startswith("sqlite:///") else None


def store_state(url: str) -> object:
    path = _sqlite_path(url)
    if path is not None:
        return path.read_bytes() if path.exists() else None
    from sqlalchemy import MetaData, create_engine

    engine = create_engine(url)
    try:
        meta = MetaData()
        meta.reflect(engine, schema="public")
        out = {}
        with engine.connect() as conn:
            for name, table in sorted(meta.tables.items()):
                out[name] = sorted((tuple(r) for r in conn.execute(table.select())), key=repr)
        return out
    finally:
        engine.dispose()


def commits_left(url: str) -> set[str]:
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return {r[0] for r in conn.execute(text('select "commit" from baseline'))}
    finally:
        engine.dispose()
