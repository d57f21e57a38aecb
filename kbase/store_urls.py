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


_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*://"
# What a URL parser may cut a password at: a driver that splits a password holding '@' (or ':' '/' '?' ...)
# where the user did not mean it echoes the pieces as a host, port or database name.
_PIECES = re.compile(r"[@:/?#&=;,\s]+")
_SHORT = 4  # pieces shorter than this are masked only where they stand alone (quoted, between delimiters)
_EDGE = "\"'@:/=?&;,\\s"


def _url_password(url: str, spaces: bool = False) -> str | None:
    """The password of ``scheme://user:password@host``: the text between the first ':' of the userinfo and the
    last '@' (so '@', ':' and '/' in a password are covered), if any. ``spaces``: ``url`` is one URL, whose
    password may hold spaces (not a message quoting one)."""
    m = re.match(_SCHEME + (r"(.*)@" if spaces else r"([^\s]*)@"), url, re.DOTALL)
    if not m or ":" not in m.group(1):
        return None
    return m.group(1).split(":", 1)[1] or None


def _secrets_of(source: str, whole_url: bool) -> set[str]:
    """Every form of every password in ``source``: as written, percent-decoded, and each piece a parser may
    cut it into (see ``_PIECES``)."""
    from urllib.parse import unquote

    found = [_url_password(source), _url_password(source, spaces=True) if whole_url else None]
    found += [m.group(3).strip("'\"") for m in _KV_SECRET.finditer(source)]
    out: set[str] = set()
    for pw in filter(None, found):
        for form in (pw, unquote(pw)):
            out.add(form)
            out.update(piece for piece in _PIECES.split(form) if piece)
    return out


def mask_url(url: str, secret_of: str | None = None) -> str:
    """``url`` (or any message) with every password replaced by ***: the ``user:password@`` part of a URL
    (up to the last '@', so '@', ':' and '/' in a password are covered), ``password=`` in a query string or a
    libpq ``key=value`` string (quoted, or URL-encoded), and any occurrence (raw or percent-decoded) of the
    password of ``secret_of`` (the store URL) or of a piece of it, which drivers echo in their errors when they
    cut a password with '@' in it where the user did not mean (``'ngPw99@127.0.0.1'`` of ``u:Wr@ngPw99@host``):
    pieces of 4 characters or more wherever they appear, shorter ones where they stand alone."""
    text = str(url)
    secrets = _secrets_of(text, whole_url=re.match(_SCHEME, text) is not None)
    if secret_of:
        secrets |= _secrets_of(secret_of, whole_url=True)
    for pw in sorted((p for p in secrets if len(p) >= _SHORT), key=len, reverse=True):
        text = text.replace(pw, "***")
    for pw in sorted((p for p in secrets if len(p) < _SHORT), key=len, reverse=True):
        text = re.sub(f"(?:(?<=[{_EDGE}])|^){re.escape(pw)}(?=[{_EDGE}]|$)", "***", text)
    # (a scheme starts a word: without the look-behind, every position of a long word is tried, O(n^2))
    text = re.sub(rf"(?<![A-Za-z0-9+.-])({_SCHEME})([^\s]*)@",
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
    if value.startswith(("postgresql://", "postgres://", "postgresql+psycopg://")):
        # kbase's driver is psycopg2; a psycopg (3) URL, as earlier kbase documented it, names the same server
        return "postgresql+psycopg2://" + value.split("://", 1)[1]
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
