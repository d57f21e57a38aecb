"""The store's failures in one line each: a driver's error turned into what a user can act on (the password
masked), and "no store here" for a read-only command."""

from __future__ import annotations

import os

from kbase.errors import StoreError
from kbase.store_urls import mask_url, sqlite_path


class NoStoreError(StoreError):
    """A read-only command found no store where one was looked for (nothing was created)."""


def store_error(url: str, exc: Exception, text: str | None = None) -> StoreError:
    """Turn a driver error (or ``text`` about it) into one line a user can act on, the password masked."""
    if text is None:
        text = str(getattr(exc, "orig", exc)).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    where = mask_url(url)
    text = mask_url(text, secret_of=url)
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
        return StoreError(f"store {where}: database is locked by another writer (waited out the busy timeout)")
    if "not a database" in low or "malformed" in low or "corrupt" in low:
        return StoreError(f"store {where}: not a kbase database or corrupt ({text})")
    if "unable to open" in low:
        return StoreError(f"store {where}: cannot open the database file ({text})")
    if "connection" in low or "could not connect" in low or "password" in low or "timeout" in low:
        return StoreError(f"store {where}: cannot connect ({mask_url(text)})")
    return StoreError(f"store {where}: {mask_url(text)}")
