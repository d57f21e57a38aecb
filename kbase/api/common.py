"""What the front door's modules share: the progress callback type and the store context."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from kbase.settings import Settings

if TYPE_CHECKING:

    from kbase.store.engine import Store

Progress = Callable[[int, int], None]  # (rows read now, rows in all), as a large export streams


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


