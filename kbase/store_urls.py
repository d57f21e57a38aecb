"""Store URLs: how ``--db`` values become SQLAlchemy URLs, and how any password in them (or in a message
quoting them) is masked, in every form libpq and SQLAlchemy accept."""

from __future__ import annotations

import re
from pathlib import Path

from kbase.errors import StoreError

_SECRET_KEYS = r"(?:password|passwd|pwd|sslpassword)"
# key=value (libpq DSN, URL query string, possibly URL-encoded '=' as %3D), value quoted or bare.
_KV_SECRET = re.compile(rf"(?i)\b({_SECRET_KEYS})(\s*=\s*|%3D)"
                        r"('(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^\s&;,)]*?(?=$|[\s&;,)]|:\s))")


_LIBPQ_DSN = re.compile(r"(?i)^\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode)\s*=")


def _url_password(url: str) -> str | None:
    """The password of ``scheme://user:password@host`` (text before the last '@'), if any."""
    m = re.match(r"[A-Za-z][A-Za-z0-9+.-]*://([^\s]*)@", url)
    if not m or ":" not in m.group(1):
        return None
    return m.group(1).split(":", 1)[1] or None


def mask_url(url: str, secret_of: str | None = None) -> str:
    """``url`` (or any message) with every password replaced by ***: the ``user:password@`` part of a URL
    (up to the last '@', so '@', ':' and '/' in a password are covered), ``password=`` in a query string or a
    libpq ``key=value`` string (quoted, or URL-encoded), and any literal occurrence (raw or percent-decoded)
    of the password of ``secret_of`` (the store URL), which drivers may echo in their errors."""
    from urllib.parse import unquote

    text = str(url)
    secrets = [p for p in {_url_password(text), _url_password(secret_of or "")} if p]
    for source in (text, secret_of or ""):  # ?password=… and libpq password=… values, quotes stripped
        secrets += [m.group(3).strip("'\"") for m in _KV_SECRET.finditer(source) if m.group(3).strip("'\"")]
    for pw in list(secrets):
        secrets.append(unquote(pw))
    for pw in sorted({p for p in secrets if len(p) >= 1}, key=len, reverse=True):
        text = text.replace(pw, "***")
    text = re.sub(r"([A-Za-z][A-Za-z0-9+.-]*://)([^\s]*)@",
                  lambda m: m.group(1) + (m.group(2).split(":", 1)[0] + ":***" if ":" in m.group(2)
                                          else m.group(2)) + "@", text)
    return _KV_SECRET.sub(lambda m: f"{m.group(1)}{m.group(2)}***", text)


def normalize_url(value: str, base: Path | None = None) -> str:
    if value.strip() == ":memory:":
        return "sqlite://"  # in memory, never a file named ':memory:'
    if "://" not in value and _LIBPQ_DSN.match(value):
        raise StoreError("looks like a libpq key=value connection string, not a path: give the database as a "
                         "postgresql://user@host/dbname URL (the password in PGPASSWORD or ~/.pgpass)", field="db",
                         value=mask_url(value))
    if "://" not in value:
        p = Path(value).expanduser()
        if not p.is_absolute():
            p = (base or Path.cwd()) / p
        return f"sqlite:///{p}"
    if value.startswith("postgresql://") or value.startswith("postgres://"):
        return "postgresql+psycopg://" + value.split("://", 1)[1]
    return value


def sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for other databases and in-memory SQLite)."""
    if url.startswith("sqlite:///"):
        rest = url[len("sqlite:///"):].split("?", 1)[0]
        if rest in ("", ":memory:") or rest.startswith("file::memory:"):
            return None
        return Path(rest)
    return None


def is_memory(url: str) -> bool:
    return url.startswith("sqlite") and sqlite_path(url) is None
