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
    ("postgres://u:Zq9secret@127.0.0.1:1/db", "Zq9secret"),
    ("postgresql://u:Zq9%3Dsec%26ret@127.0.0.1:1/db", "Zq9%3Dsec%26ret"),
    ("postgresql://127.0.0.1:1/db?PASSWORD%3DZq9secret", "Zq9secret"),
    ("host=127.0.0.1 port=1 user=u password=Zq9secret dbname=x", "Zq9secret"),
    ("host=127.0.0.1 password='Zq9 sec ret' dbname=x", "Zq9 sec ret"),
    ("mysql+nodriver://u:Zq9secret@127.0.0.1:1/db", "Zq9secret"),
]


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
    for how in ("flag", "env"):
        if how == "flag":
            r = kb(*args, "--db", url)
        else:
            monkeypatch.setenv("KBASE_DB", url)
            r = kb(*args)
            monkeypatch.delenv("KBASE_DB")
        assert r.rc in (0, 2), r
        assert not leaks(r.stdout + r.stderr, secret), r
        if r.rc == 2:
            assert len(r.stderr.strip().splitlines()) == 1, r
    assert list(tmp_path.iterdir()) == []  # no file made from a connection string
