"""What the front door's modules share: the progress callback type and the store context."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeVar

from kbase.settings import Settings

if TYPE_CHECKING:

    from kbase.store.engine import Store
    from kbase.store.fast_read import FastReader

T = TypeVar("T")

Progress = Callable[[int, int], None]  # (rows read now, rows in all), as a large export streams


def warm_imports(*modules: str) -> None:
    """Import ``modules`` on a daemon thread, while the caller's thread reads a profile (its readers release
    the GIL): a command that stores what it read finds the store stack already loaded."""
    import importlib
    import threading

    def work() -> None:
        for m in modules:
            with contextlib.suppress(Exception):  # the caller's own import reports any problem
                importlib.import_module(m)

    threading.Thread(target=work, name="kbase-warm-imports", daemon=True).start()


@contextlib.contextmanager
def _store(settings: Settings, store: Store | None, readonly: bool = False) -> Iterator[Store]:
    """The given store, or the settings' store opened for this call and closed after it (``readonly``:
    a command that only reads never creates a store: ``NoStoreError`` instead)."""
    if store is not None:
        yield store
        return
    from kbase.store.engine import open_store

    opened = open_store(settings, readonly=readonly)
    try:
        yield opened
    finally:
        opened.close()




def _fast_read(settings: Settings, store: Store | None, fn: Callable[[FastReader], T]) -> T | None:
    """``fn`` on the read-only path (``store.fast_read``: no SQLAlchemy, no pandas) when no store
    was given and that path applies to the settings' store; None otherwise — then the caller opens the
    store as usual, which reports any problem in its own words (``read_only``: also off with
    ``KBASE_NO_FAST_READ=1``)."""
    if store is not None:
        return None
    from kbase.store.fast_read import read_only

    return read_only(settings.store_url(), settings.busy_timeout_s, fn)
