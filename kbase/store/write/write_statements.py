"""Every statement a snapshot runs on the store, as SQLAlchemy Core, and the schema's DDL: the one source of the
write path's SQL.

``kbase snapshot`` must not import SQLAlchemy, SQLModel or Alembic (~0.4 s of a 1M-launch snapshot): it runs
these statements' text on the driver (``writer``: Python's ``sqlite3``, or psycopg2) and creates a new store
from the DDL of ``SQLModel.metadata`` stamped at the head revision (``create``). The text is compiled once per
dialect into ``write_sql.py`` by ``python -m kbase.store.write.write_statements``; a test compiles everything again
and holds that file equal, another that a store created from it is the one ``alembic upgrade head`` makes.

The PostgreSQL text is psycopg2's dialect's (what SQLAlchemy itself sends on ``postgresql+psycopg2``); the SQLite
text is the named-parameter form. An expanding ``IN`` list stays ``__[POSTCOMPILE_name]``, expanded per call
(``writer.bind``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Column, MetaData, PrimaryKeyConstraint, String, Table, bindparam, func, literal_column, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from kbase.store.read.statements import statement
from kbase.store.schema.models import BASELINE, BASELINE_KERNELS, KERNEL_NAME, OP_NAME, WORKLOAD_KERNEL
from kbase.store.schema.schema_names import head_revision

bt = BASELINE.c
# The unique capture key (``ux_baseline_capture``): one capture (file and window) at one commit, copy 0 unless
# stored again on purpose (--force)
CAPTURE_KEY = ("workload", "commit", "source_sha256", "window_spec", "capture_copy")
BASELINE_COLUMNS = tuple(c.name for c in BASELINE.c)
WRITES: dict[str, Callable[[Any], Any]] = {}  # name -> build(the dialect's insert) -> statement


def _write(build: Callable[[Any], Any]) -> Callable[[Any], Any]:
    WRITES[build.__name__] = build
    return build


def _values(table: Table, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    return {c.name: bindparam(c.name) for c in table.c if c.name not in skip}


def _capture_where() -> list:
    return [bt[k] == bindparam(k) for k in CAPTURE_KEY[:-1]]


@_write
def duplicate_baseline(_insert) -> Any:
    """The read path's ``duplicate_baseline`` (the same statement): a baseline of these bytes on this window at
    this commit, any copy."""
    return statement("duplicate_baseline")


@_write
def next_copy(_insert) -> Any:
    return select(func.max(bt.capture_copy)).where(*_capture_where())


@_write
def insert_baseline(insert) -> Any:
    """One baseline row, unless its capture key is taken (then no row comes back)."""
    return (insert(BASELINE).values(_values(BASELINE, ("id",)))
            .on_conflict_do_nothing(index_elements=list(CAPTURE_KEY)).returning(bt.id))


@_write
def same_capture(_insert) -> Any:
    return select(BASELINE).where(*_capture_where(), bt.capture_copy == literal_column("0"))


@_write
def kernel_name_ids(_insert) -> Any:
    return select(KERNEL_NAME.c.name_hash, KERNEL_NAME.c.id).where(
        KERNEL_NAME.c.name_hash.in_(bindparam("hashes", expanding=True)))


@_write
def insert_kernel_names(insert) -> Any:
    return insert(KERNEL_NAME).values(_values(KERNEL_NAME, ("id",))).on_conflict_do_nothing(
        index_elements=["name_hash"]).inline()


@_write
def op_name_ids(_insert) -> Any:
    return select(OP_NAME.c.name_hash, OP_NAME.c.id).where(OP_NAME.c.name_hash.in_(bindparam("hashes", expanding=True)))


@_write
def insert_op_names(insert) -> Any:
    return (insert(OP_NAME).values(_values(OP_NAME, ("id",))).on_conflict_do_nothing(index_elements=["name_hash"])
            .inline())


@_write
def insert_baseline_kernels(insert) -> Any:
    return insert(BASELINE_KERNELS).values(_values(BASELINE_KERNELS)).inline()


@_write
def workload_kernel_ids(_insert) -> Any:
    return select(WORKLOAD_KERNEL.c.name_id).where(WORKLOAD_KERNEL.c.workload == bindparam("workload"))


@_write
def insert_workload_kernels(insert) -> Any:
    return insert(WORKLOAD_KERNEL).values(_values(WORKLOAD_KERNEL)).on_conflict_do_nothing().inline()


# ------------------------------------------------------------------------------------------ compiled text

DIALECTS = ("sqlite", "postgresql")


def _dialect(name: str) -> Any:
    return sqlite.dialect(paramstyle="named") if name == "sqlite" else postgresql.psycopg2.dialect()


def _insert(name: str) -> Any:
    return sqlite.insert if name == "sqlite" else postgresql.insert


def write_text(name: str, dialect: str) -> str:
    """Statement ``name`` compiled for ``dialect``."""
    return str(WRITES[name](_insert(dialect)).compile(dialect=_dialect(dialect)))


def version_table() -> Table:
    """Alembic's version table, as Alembic creates it (``MigrationContext._version``)."""
    return Table("alembic_version", MetaData(), Column("version_num", String(32), nullable=False),
                 PrimaryKeyConstraint("version_num", name="alembic_version_pkc"))


def schema_ddl(dialect: str) -> list[str]:
    """The statements that create the head schema of ``SQLModel.metadata`` (tables in dependency order, each
    followed by its indexes, by name) and Alembic's version table, on ``dialect``."""
    from sqlmodel import SQLModel

    d = _dialect(dialect)
    out = []
    for table in [*SQLModel.metadata.sorted_tables, version_table()]:
        out.append(str(CreateTable(table).compile(dialect=d)).strip())
        indexes = sorted(table.indexes, key=lambda i: str(i.name))
        out += [str(CreateIndex(i).compile(dialect=d)).strip() for i in indexes]
    return out


def write_sql_module() -> str:
    """The text of ``write_sql.py``."""
    names = sorted(WRITES)
    lines = ['"""The SQL text of every statement a snapshot writes or reads (``write_statements``) and the DDL of',
             "the head schema, per dialect, for the write path (``writer``, ``create``), which must not import",
             "SQLAlchemy. GENERATED by ``python -m kbase.store.write.write_statements``: do not edit;",
             'tests/store/test_write_sql.py holds it equal to the statements and the models."""', "",
             f"REVISION = {head_revision()!r}  # the Alembic revision the DDL is stamped with",
             f"BASELINE_COLUMNS = {BASELINE_COLUMNS!r}", "", "SQL = {"]
    for dialect in DIALECTS:
        lines.append(f"    {dialect!r}: {{")
        lines += [f"        {name!r}: {write_text(name, dialect)!r}," for name in names]
        lines.append("    },")
    lines += ["}", "", "DDL = {"]
    for dialect in DIALECTS:
        lines.append(f"    {dialect!r}: [")
        lines += [f"        {ddl!r}," for ddl in schema_ddl(dialect)]
        lines.append("    ],")
    lines += ["}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    from pathlib import Path

    Path(__file__).with_name("write_sql.py").write_text(write_sql_module(), encoding="utf-8")
