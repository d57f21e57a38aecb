"""Issue 12: a database password never shows, in any URL form libpq or SQLAlchemy accepts (user:password@,
percent-encoded or with '@', ':' and '/' in it, ``?password=`` in the query string, a libpq ``key=value``
string), in error lines, ``kbase db current`` or JSON output."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from kbase.store.engine import mask_url

from helpers.cli import kb

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

FORMS = [
    ("postgresql://u:Zq9%40secret@127.0.0.1:1/db", "Zq9%40secret"),
    ("postgresql://u:Zq9@sec:ret/x@127.0.0.1:1/db", "Zq9@sec:ret/x"),
    ("postgresql://u@127.0.0.1:1/db?password=Zq9secret", "Zq9secret"),
    ("postgresql://127.0.0.1:1/db?user=u&password=Zq9secret&sslmode=disable", "Zq9secret"),
    ("postgresql+psycopg://u:Zq9secret@/db?host=127.0.0.1&port=1", "Zq9secret"),
    ("postgresql+psycopg2://u:Zq9secret@/db?host=127.0.0.1&port=1", "Zq9secret"),
    ("postgres://u:Zq9secret@127.0.0.1:1/db", "Zq9secret"),
    ("postgresql://u:Zq9%3Dsec%26ret@127.0.0.1:1/db", "Zq9%3Dsec%26ret"),
    ("postgresql://127.0.0.1:1/db?PASSWORD%3DZq9secret", "Zq9secret"),
    ("host=127.0.0.1 port=1 user=u password=Zq9secret dbname=x", "Zq9secret"),
    ("host=127.0.0.1 password='Zq9 sec ret' dbname=x", "Zq9 sec ret"),
    ("mysql+nodriver://u:Zq9secret@127.0.0.1:1/db", "Zq9secret"),
]


def both_ways(args: tuple, url: str, monkeypatch) -> list:
    """``kbase ARGS`` with the store given as ``--db URL`` and as ``KBASE_DB=URL``."""
    out = [kb(*args, "--db", url)]
    monkeypatch.setenv("KBASE_DB", url)
    out.append(kb(*args))
    monkeypatch.delenv("KBASE_DB")
    return out


def leaks(text: str, secret: str) -> bool:
    return any(s in text for s in {secret, unquote(secret)})


@pytest.mark.parametrize(("url", "secret"), FORMS, ids=[f[0][:40] for f in FORMS])
def test_mask_url_hides_every_form(url, secret):
    assert not leaks(mask_url(url), secret), mask_url(url)
    assert not leaks(mask_url(f"error: could not connect with {unquote(secret)}", secret_of=url), secret)


@pytest.mark.parametrize(("url", "secret"), FORMS, ids=[f[0][:40] for f in FORMS])
@pytest.mark.parametrize("args", [("db", "current"), ("list",), ("list", "--format", "json"), ("show", "@1"),
                                  ("gate", "@1", "@2", "--format", "json"), ("db", "upgrade")])
def test_no_command_prints_a_password(url, secret, args, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    for r in both_ways(args, url, monkeypatch):
        assert r.rc in (0, 2), r
        assert not leaks(r.stdout + r.stderr, secret), r
        if r.rc == 2:
            assert len(r.stderr.strip().splitlines()) == 1, r
    assert list(tmp_path.iterdir()) == []  # no file made from a connection string


# ------------------------------------------------------------------------------------------ issue 29: pieces

# Passwords a URL parser cuts where the user did not mean (a raw '@', ':', '/', '?', '#', a space), and plain
# ones for contrast. Drivers then echo the pieces as a host, port or database name ('ngPw99@127.0.0.1').
SHAPES = ["Wr@ngPw99", "a@b/c", "p:w@xyz9", "pa/ss@word", "pa?ss#x@hostish", "Zq9%40secret", "x@127.0.0.1:1/y",
          "p w@dq7", "sec@ret@more", "@leading9", "trailing9@", "a:b:c@dd", "Wr@ng:Pw/99?x=1#f", "ünï@cödé",
          "%40%3A%2F@raw", "plainSecret123", "x:y", "semi;colon@comma,x", "&amp=1@q"]


def pieces(pw: str) -> list[str]:
    import re

    forms = {pw, unquote(pw)}
    return sorted({p for f in forms for p in [f, *re.split(r"[@:/?#&=;,\s]+", f)] if p}, key=len)


def shows_a_piece(text: str, pw: str) -> str | None:
    """A piece of ``pw`` that ``text`` shows: one of 4+ characters anywhere, or any quoted or next to '@'."""
    import re

    for p in pieces(pw):
        if len(p) >= 4 and p in text:
            return p
        if re.search(rf"""(?:['"@]){re.escape(p)}(?=['"@])""", text):
            return p
    return None


def parser_echo(url: str) -> str:
    """What drivers say about ``url``: its host, port and database as SQLAlchemy's parser and libpq's cut
    them, quoted as psycopg (3), psycopg2 and libpq quote them."""
    from sqlalchemy.engine import make_url

    u = make_url(url.replace("postgresql://", "postgresql+psycopg2://"))
    rest = url.split("://", 1)[1]
    libpq_host = rest.split("@", 1)[1].split("/", 1)[0] if "@" in rest.split("/", 1)[0] else ""
    return (f"failed to resolve host '{u.host}': [Errno -2] Name or service not known; could not translate host "
            f"name \"{u.host}\" to address: Name or service not known; connection to server at "
            f"\"{libpq_host}\", port {u.port} failed: FATAL:  database \"{u.database}\" does not exist")


@pytest.mark.parametrize("pw", SHAPES)
def test_every_piece_of_a_password_is_masked_in_driver_words(pw):
    url = f"postgresql://kb:{pw}@127.0.0.1:5432/db"
    try:
        said = parser_echo(url)
    except Exception:  # noqa: BLE001 - SQLAlchemy's own parse error quotes the URL: mask that
        said = f"Could not parse SQLAlchemy URL from string '{url}'"
    masked = mask_url(f"store {url}: {said}", secret_of=url)
    assert shows_a_piece(masked, pw) is None, masked
    assert "kb:***@" in masked or pw.startswith(":")


@pytest.mark.parametrize("pw", SHAPES)
def test_real_driver_errors_show_no_piece_of_the_password(pg_url, pw, tmp_path, monkeypatch):
    """The throwaway PostgreSQL server (trust authentication: a password parsed right is simply accepted);
    the driver's own errors for the pieces it cut are what must not show."""
    monkeypatch.chdir(tmp_path)
    hostport = pg_url.split("@", 1)[1].split("/", 1)[0]
    url = f"postgresql://postgres:{pw}@{hostport}/kbase_test"
    for args in (("list",), ("db", "current"), ("show", "@1"), ("list", "--format", "json")):
        for r in both_ways(args, url, monkeypatch):
            assert r.rc in (0, 2), r
            assert shows_a_piece(r.stdout + r.stderr, pw) is None, (pw, r)
            if r.rc == 2:
                assert len(r.stderr.strip().splitlines()) == 1, r


def test_an_internal_error_line_masks_the_store_password_too(monkeypatch):
    """Whatever path a message takes out of the command line (library error, driver error, internal error),
    pieces of the store URL's password are masked."""
    from kbase.cli.errors import error_line

    url = "postgresql://u:Wr@ngPw99@127.0.0.1/db"
    monkeypatch.setenv("KBASE_DB", url)
    for exc in (RuntimeError("boom near 'ngPw99@127.0.0.1'"), ValueError(f"bad {url}")):
        line = error_line(exc, None, labels=False)
        assert "ngPw99" not in line and "Wr@ng" not in line, line
