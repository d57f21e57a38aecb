"""One store read layer: the read-only paths (SQLite and PostgreSQL) run the text of the very SQLAlchemy
statements the other path executes (``kbase.store.statements`` compiled for each dialect into
``read_sql.py``), never SQL of their own.

``KBASE_UPDATE_SQL=1 pytest tests/store/test_read_sql.py`` (or ``python -m kbase.store.statements``)
writes ``read_sql.py`` again after a statement changed.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from kbase.store import read_sql, statements

READ_SQL = Path(read_sql.__file__)


def test_the_fast_path_sql_is_the_statements_compiled():
    want = statements.read_sql_module()
    if os.environ.get("KBASE_UPDATE_SQL") == "1":
        READ_SQL.write_text(want, encoding="utf-8")
    assert READ_SQL.read_text(encoding="utf-8") == want, (
        "kbase/store/read_sql.py is not the statements compiled: run python -m kbase.store.statements")
    assert set(read_sql.SQL) == {"sqlite", "postgresql"}
    for texts in (*read_sql.SQL.values(), read_sql.KINDS):
        assert set(texts) == set(statements.STATEMENTS)
    for name in statements.STATEMENTS:
        assert read_sql.SQL["sqlite"][name] == statements.sqlite_text(name), name
        assert read_sql.SQL["postgresql"][name] == statements.postgresql_text(name), name


def test_the_postgresql_text_is_the_statement_a_json_array_a_row():
    """What ``pg_read`` runs differs from the statement only in its select list: each row is one JSON
    array of the statement's columns, in order, and the kinds name each column's decoding."""
    import re

    from sqlalchemy.dialects import postgresql

    for name in statements.STATEMENTS:
        query = statements.statement(name)
        plain = str(query.compile(dialect=postgresql.dialect(paramstyle="pyformat")))
        text = read_sql.SQL["postgresql"][name]
        head, tail = re.match(r"SELECT json_build_array\((.*?)\) AS json_build_array_1 (\nFROM .*)", text, re.S).groups()
        assert plain == f"SELECT {head} {tail}", name
        assert len(read_sql.KINDS[name]) == len(query.selected_columns)
    assert read_sql.KINDS["kernel_blobs"].count("x") == 4  # levels, board, samples, sketches: bytea


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

    from kbase.store import reader

    source = inspect.getsource(reader)
    for name in statements.STATEMENTS:
        assert f'"{name}"' in source, f"statement {name} is not read by StoreReader"
