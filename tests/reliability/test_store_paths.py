"""Issue 29, classes 5 and 9: a store path that can never be a database file (a file where a folder should
be, a folder where the file should be) and a store whose Alembic stamp cannot be right (two revisions in
``alembic_version``, the head revision with one of kbase's tables missing) are one line and exit 2 for every
command that opens or looks for the store — read-only ones too (``list`` no longer answers an empty list) —
and nothing is changed."""

from __future__ import annotations

import functools
import hashlib
import sqlite3
from pathlib import Path

import pytest
import test_exit_contract as contract

from kbase.store.schema.schema_names import OWN_TABLES

from helpers.cli import kb

world = contract.world  # the fixture: the exit-code contract test's store (@1, @2) and profile

REV1 = "1" * 40

# Every command that opens or looks for the store, with the arguments it needs ({P}: a profile).
COMMANDS = [
    ("list",), ("show", "@1"), ("history", "k"), ("db", "current"), ("db", "upgrade"), ("diff", "@1", "@2"),
    ("gate", "@1", "@2"), ("gate", "@1", "@2", "--if-no-baseline", "pass"), ("steps",), ("rm", "1", "--yes"),
    ("report", "--out", "{T}/rep"), ("accept", "--list"), ("accept", "--revoke", "1"), ("top", "{P}"),
    ("snapshot", "{P}", "--no-git", "--rev", REV1),
]


def _args(cmd: tuple[str, ...], world: dict[str, Path], tmp: Path) -> list[str]:
    return [a.replace("{P}", str(world["P"])).replace("{T}", str(tmp)) for a in cmd]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_error_line(r) -> str:
    assert r.rc == 2, r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kbase: error:"), r
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r
    return lines[0]


def _blocked(kind: str, tmp: Path) -> tuple[Path, Path]:
    """(the --db path, the file in its way) for each way a path can be impossible."""
    blocker = tmp / "afile"
    blocker.write_text("not a folder")
    if kind == "parent-file":
        return blocker / "kbase.db", blocker
    if kind == "grandparent-file":
        return blocker / "sub" / "kbase.db", blocker
    if kind == "parent-link-to-file":
        link = tmp / "link"
        link.symlink_to(blocker)
        return link / "kbase.db", blocker
    assert kind == "relative-parent-file"
    return Path("afile") / "kbase.db", blocker


@pytest.mark.parametrize("kind", ["parent-file", "grandparent-file", "parent-link-to-file", "relative-parent-file"])
@pytest.mark.parametrize("cmd", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_a_store_under_a_file_is_exit_2_for_every_command(world, tmp_path, monkeypatch, kind, cmd):
    monkeypatch.chdir(tmp_path)
    db, blocker = _blocked(kind, tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    line = _one_error_line(kb(*_args(cmd, world, tmp_path), "--db", db))
    assert "is a file, not a directory" in line and ("afile" in line or "link" in line), line
    assert blocker.read_text() == "not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing created: no report, no lock


@pytest.mark.parametrize("cmd", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_a_store_path_that_is_a_folder_is_exit_2_for_every_command(world, tmp_path, cmd):
    folder = tmp_path / "store.db"
    folder.mkdir()
    line = _one_error_line(kb(*_args(cmd, world, tmp_path), "--db", folder))
    assert "is a directory" in line, line
    assert list(folder.iterdir()) == []


def _two_rows(conn: sqlite3.Connection, second: str) -> None:
    conn.execute("INSERT INTO alembic_version VALUES (?)", (second,))


def _drop(conn: sqlite3.Connection, table: str) -> None:
    conn.execute(f"DROP TABLE {table}")


DAMAGE = {
    "two rows: head and an older one": lambda c: _two_rows(c, "0007"),
    "two rows: head and an unknown one": lambda c: _two_rows(c, "9999"),
    "three rows": lambda c: (_two_rows(c, "0001"), _two_rows(c, "0002")),
    **{f"head without {t}": functools.partial(_drop, table=t) for t in sorted(OWN_TABLES - {"alembic_version"})},
}
STORE_COMMANDS = [c for c in COMMANDS if c[0] not in ("top",)]


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("cmd", STORE_COMMANDS, ids=[" ".join(c[:2]) for c in STORE_COMMANDS])
def test_a_store_whose_stamp_cannot_be_right_is_exit_2(world, tmp_path, damage, cmd):
    db = tmp_path / "k.db"
    db.write_bytes(world["S"].read_bytes())
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys = OFF")
    DAMAGE[damage](conn)
    conn.commit()
    conn.close()
    before = _digest(db)
    line = _one_error_line(kb(*_args(cmd, world, tmp_path), "--db", db))
    assert "damaged or edited by hand" in line and "nothing was changed" in line, line
    assert _digest(db) == before


def test_library_refuses_a_store_with_two_stamps(world, tmp_path):
    from kbase.errors import StoreError
    from kbase.store.describe import describe_schema
    from kbase.store.engine import open_store

    db = tmp_path / "k.db"
    db.write_bytes(world["S"].read_bytes())
    with sqlite3.connect(db) as conn:
        _two_rows(conn, "0007")
    for call in (lambda: open_store(str(db)), lambda: describe_schema(f"sqlite:///{db}")):
        with pytest.raises(StoreError, match="holds 2 revisions"):
            call()
