"""One store read layer: the one reader runs the text of the SQLAlchemy statements (``kbase.store.read.statements``
compiled for each dialect into ``read_sql.py``) on its DB-API connection, never SQL of its own.

``KBASE_UPDATE_SQL=1 pytest tests/store/test_read_sql.py`` (or ``python -m kbase.store.read.statements``)
writes ``read_sql.py`` again after a statement changed.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from kbase.store.read import read_sql, statements

READ_SQL = Path(read_sql.__file__)


def test_the_read_sql_is_the_statements_compiled():
    want = statements.read_sql_module()
    if os.environ.get("KBASE_UPDATE_SQL") == "1":
        READ_SQL.write_text(want, encoding="utf-8")
    assert READ_SQL.read_text(encoding="utf-8") == want, (
        "kbase/store/read/read_sql.py is not the statements compiled: run python -m kbase.store.read.statements")
    assert set(read_sql.SQL) == {"sqlite", "postgresql"}
    for texts in read_sql.SQL.values():
        assert set(texts) == set(statements.STATEMENTS)
    for name in statements.STATEMENTS:
        assert read_sql.SQL["sqlite"][name] == statements.sqlite_text(name), name
        assert read_sql.SQL["postgresql"][name] == statements.postgresql_text(name), name


def test_both_dialects_take_the_same_parameters():
    """Each statement's SQLite and PostgreSQL text name the same parameters and lists (``connect.bind`` fills
    both from one mapping), and select the same columns."""
    import re

    for name in statements.STATEMENTS:
        lite, pg = read_sql.SQL["sqlite"][name], read_sql.SQL["postgresql"][name]
        lists = re.findall(r"__\[POSTCOMPILE_(\w+)\]", lite)
        assert lists == re.findall(r"__\[POSTCOMPILE_(\w+)\]", pg), name
        assert set(re.findall(r":(\w+)", lite)) == set(re.findall(r"%\((\w+)\)s", pg)), name
        assert lite.split("FROM")[0].replace('"', "") == pg.split("FROM")[0], name


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
def test_lists_bind_per_dialect(dialect):
    """SQLite: one parameter per value of a list (an empty one matches nothing); PostgreSQL: ``= ANY`` of one
    array parameter (the list as psycopg2 adapts it; an empty array matches nothing too)."""
    from datetime import date

    from kbase.store.read.connect import bind

    mark = {"sqlite": ":{}", "postgresql": "%({})s"}[dialect].format
    sql, args = bind("a = X(a) AND b IN (__[POSTCOMPILE_b]) AND c IN (__[POSTCOMPILE_c]) AND d >= X(d)".replace(
        "X(a)", mark("a")).replace("X(d)", mark("d")), {"a": 7, "b": ("p", "q"), "c": [], "d": date(2026, 1, 5)},
        dialect)
    if dialect == "sqlite":
        assert sql == f"a = {mark('a')} AND b IN ({mark('b_0')}, {mark('b_1')}) AND c IN (NULL) AND d >= {mark('d')}"
        # SQLAlchemy's SQLite DATE is ISO text
        assert args == {"a": 7, "b_0": "p", "b_1": "q", "d": "2026-01-05"}
    else:
        assert sql == f"a = {mark('a')} AND b = ANY({mark('b')}) AND c = ANY({mark('c')}) AND d >= {mark('d')}"
        assert args == {"a": 7, "b": ["p", "q"], "c": [], "d": date(2026, 1, 5)}  # psycopg2 sends a date


def test_no_other_module_writes_read_sql():
    """SQL text is compiled, not written: outside the statements (the read statements, and the write path's in
    ``write_statements``) no store module holds a SELECT of kbase's tables (the schema bookkeeping — Alembic's
    version, SQLite's and PostgreSQL's table lists, PostgreSQL's lock — aside)."""
    store = Path(statements.__file__).parent
    allowed = {"statements.py", "read_sql.py", "write_statements.py", "write_sql.py"}
    bookkeeping = ("alembic_version", "sqlite_master", "pg_advisory", "pg_catalog")
    for path in sorted(store.glob("*.py")):
        if path.name in allowed:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and not any(
                    b in node.value for b in bookkeeping):
                assert "SELECT " not in node.value.upper(), f"{path.name}: literal SQL {node.value[:60]!r}"


def test_every_statement_is_read_by_the_reader():
    """Each compiled statement is one of ``StoreReader``'s questions (none is left over, none missing)."""
    import inspect

    from kbase.store.read import reader

    source = inspect.getsource(reader)
    for name in statements.STATEMENTS:
        assert f'"{name}"' in source, f"statement {name} is not read by StoreReader"
