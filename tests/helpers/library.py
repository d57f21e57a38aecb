"""The library as a test calls it: ``kbase.snapshot`` from the usual keywords, an engine on a store, a store one
schema revision behind."""

from __future__ import annotations

from pathlib import Path


def snap(path, *, name=None, db=None, repo=None, store=None, **kwargs):
    """``kbase.snapshot`` with its settings built from the usual keywords (``name``, ``db``, ``repo``)."""
    import kbase

    settings = kbase.Settings.load(repo=repo, db=db, name=name)
    return kbase.snapshot(path, settings, store=store, **kwargs)


def engine_of(url: str):
    """An engine on the store at ``url`` (migrated to head); dispose it when done."""
    from kbase.store import open_store

    return open_store(url).engine


def old_schema_copy(url: str, dest: Path) -> str:
    """A copy of the store downgraded one revision (what an older kbase left)."""
    import shutil

    shutil.copy(url.removeprefix("sqlite:///"), dest)
    return downgraded(f"sqlite:///{dest}")


def downgraded(url: str) -> str:
    """The store at ``url`` downgraded one revision in place (what an older kbase left); its URL."""
    from alembic import command

    from kbase.store import engine as kdb

    eng = kdb.make_engine(url)
    cfg = kdb.alembic_config(url)
    with eng.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "-1")
    eng.dispose()
    return url
