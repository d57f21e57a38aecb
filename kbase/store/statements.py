"""Every read of the store as one SQLAlchemy Core statement: the one source of the store's read SQL.

Both read paths run these statements with the same parameters (``reader.StoreReader`` builds them):
SQLAlchemy executes them on any store (``reader.EngineReader``), and the read-only path (``fast_read``,
which must not import SQLAlchemy: ~0.4 s) runs their SQLite text (``sqlite_read``) or PostgreSQL text
(``pg_read``), compiled once into ``read_sql.py`` by ``python -m kbase.store.statements``; a test compiles
every statement again and holds that file equal, so the paths cannot drift apart.

Each statement has one shape whatever the caller asks: an optional filter is ``(:any_x OR column = :x)``
and a list is an expanding ``IN`` parameter, so one compiled text serves every call.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from sqlalchemy import Boolean, bindparam, literal_column, or_, select
from sqlalchemy.sql import Select

from kbase.store.models import ACCEPTANCE, BASELINE, BASELINE_KERNEL, BASELINE_KERNEL_OP, KERNEL_NAME, OP_NAME

bt, bk, kn, at = BASELINE.c, BASELINE_KERNEL.c, KERNEL_NAME.c, ACCEPTANCE.c
bko, opn = BASELINE_KERNEL_OP.c, OP_NAME.c
STATEMENTS: dict[str, Callable[[], Select]] = {}


def _statement(build: Callable[[], Select]) -> Callable[[], Select]:
    STATEMENTS[build.__name__] = build
    return build


def _unless(flag: str, clause):
    """An optional filter: ``clause``, or every row when the parameter ``flag`` is true."""
    return or_(bindparam(flag, type_=Boolean), clause)


def _in(name: str):
    return bindparam(name, expanding=True)


def _first(query: Select, limit=None) -> Select:
    """``query``'s first row (or first ``limit`` rows), with no anonymous parameter: SQLite's compiler adds an
    OFFSET to every LIMIT, as a parameter of a generated name unless one is given."""
    return query.limit(literal_column("1") if limit is None else limit).offset(literal_column("0"))


@cache
def statement(name: str) -> Select:
    """The statement ``name``, built once per process."""
    return STATEMENTS[name]()


# ------------------------------------------------------------------------------------------ baselines


@_statement
def baseline() -> Select:
    return select(BASELINE).where(bt.id == bindparam("id"))


@_statement
def baselines() -> Select:
    """Newest first; ``commit_like``: a LIKE pattern escaped with '/' (a commit prefix)."""
    return _first(select(BASELINE)
            .where(_unless("any_workload", bt.workload == bindparam("workload")),
                   _unless("any_branch", bt.branch == bindparam("branch")),
                   _unless("any_commit", bt.commit.like(bindparam("commit_like"), escape="/")))
            .order_by(bt.created_at.desc(), bt.id.desc()), bindparam("limit"))


@_statement
def baseline_by_identity() -> Select:
    """The newest baseline of one file (size, mtime, probe hash) at a commit on a window, by one kbase version."""
    return _first(select(bt.id)
            .where(bt.commit == bindparam("commit"), bt.source_probe == bindparam("probe"),
                   bt.source_size == bindparam("size"), bt.source_mtime_ns == bindparam("mtime_ns"),
                   bt.window_spec == bindparam("window_spec"), bt.kbase_version == bindparam("kbase_version"),
                   _unless("any_workload", bt.workload == bindparam("workload")))
            .order_by(bt.id.desc()))


@_statement
def duplicate_baseline() -> Select:
    return _first(select(BASELINE)
                  .where(bt.workload == bindparam("workload"), bt.commit == bindparam("commit"),
                         bt.source_sha256 == bindparam("sha256"), bt.window_spec == bindparam("window_spec")))


@_statement
def baselines_at() -> Select:
    return select(BASELINE).where(bt.workload == bindparam("workload"), bt.commit.in_(_in("commits"))).order_by(bt.id)


def _line_where():
    return (bt.workload == bindparam("workload"),
            _unless("any_fingerprint", bt.fingerprint == bindparam("fingerprint")),
            _unless("any_id", bt.id <= bindparam("before_id")))


@_statement
def line_baselines_at() -> Select:
    return select(BASELINE).where(*_line_where(), bt.commit.in_(_in("commits")))


@_statement
def line_baselines_newest() -> Select:
    return _first(select(BASELINE).where(*_line_where()).order_by(bt.created_at.desc(), bt.id.desc()),
                  bindparam("limit"))


# ------------------------------------------------------------------------------------------ kernel rows


@_statement
def kernel_rows() -> Select:
    """Every ``baseline_kernel`` column, then the name's (``frames.KERNEL_COLUMNS``)."""
    return (select(BASELINE_KERNEL, kn.name, kn.family, kn.short_name, kn.category, kn.tc)
            .join(KERNEL_NAME, kn.id == bk.name_id).where(bk.baseline_id.in_(_in("ids")))
            .order_by(bk.baseline_id, bk.rank))


@_statement
def level_rows() -> Select:
    """(baseline_id, name, short_name, per_iter_ns): ``frames.LEVEL_COLUMNS``."""
    return (select(bk.baseline_id, kn.name, kn.short_name, bk.per_iter_ns)
            .join(KERNEL_NAME, kn.id == bk.name_id).where(bk.baseline_id.in_(_in("ids"))))


@_statement
def op_rows() -> Select:
    """Each kernel's launches and time by op (``codec.op_pairs_from_rows``): baseline id, kernel name, op key
    (NULL: no op), op without scope, count, total_ns, iter_ns; in row order."""
    return (select(bko.baseline_id, kn.name, opn.key, opn.op, bko.count, bko.total_ns, bko.iter_ns)
            .join(KERNEL_NAME, kn.id == bko.name_id).outerjoin(OP_NAME, opn.id == bko.op_id)
            .where(bko.baseline_id.in_(_in("ids"))).order_by(bko.baseline_id, bko.id))


@_statement
def op_levels() -> Select:
    """(baseline_id, op key, op without scope, total_ns) of each (kernel, op) row of some baselines, summed
    per op by the caller: the ops' levels for history noise (``comparison.history``); NULL op rows left out."""
    return (select(bko.baseline_id, opn.key, opn.op, bko.total_ns)
            .join(OP_NAME, opn.id == bko.op_id).where(bko.baseline_id.in_(_in("ids"))))


@_statement
def leaderboard_rows() -> Select:
    """One baseline's rows as ``kbase show`` renders them, by rank."""
    return (select(bk.gpus, bk.count, bk.total_ns, bk.avg_ns, bk.median_ns, bk.min_ns, bk.max_ns, bk.std_ns,
                   bk.per_iter_ns, bk.count_per_iter, bk.share_window, bk.share_kernel, bk.amdahl_ceiling,
                   bk.fragmented, kn.name, kn.short_name, kn.family, kn.category, kn.tc, bk.iter_ns, bk.iter_count)
            .join(KERNEL_NAME, kn.id == bk.name_id).where(bk.baseline_id == bindparam("id")).order_by(bk.rank))


@_statement
def kernel_names() -> Select:
    used = (select(BASELINE_KERNEL.c.name_id).join(BASELINE, bt.id == bk.baseline_id)
            .where(bt.workload == bindparam("workload")))
    return select(kn.name, kn.short_name).where(_unless("any_workload", kn.id.in_(used))).order_by(kn.id)


@_statement
def kernel_history() -> Select:
    """One kernel across baselines, oldest first: its kernel rows come from ``ix_baseline_kernel_history``
    alone (0008), one index range instead of a page read per baseline."""
    b, k, n = BASELINE.alias("b"), BASELINE_KERNEL.alias("bk"), KERNEL_NAME.alias("kn")
    return (select(b.c.id, b.c.commit, b.c.created_at, b.c.workload, b.c.branch, k.c.count, k.c.total_ns,
                   k.c.avg_ns, k.c.per_iter_ns, k.c.share_window)
            .join(k, k.c.baseline_id == b.c.id).join(n, n.c.id == k.c.name_id)
            .where(n.c.name_hash == bindparam("name_hash"),
                   _unless("any_workload", b.c.workload == bindparam("workload")),
                   _unless("any_branch", b.c.branch == bindparam("branch")))
            .order_by(b.c.created_at, b.c.id))


# ------------------------------------------------------------------------------------------ acceptances


@_statement
def acceptances() -> Select:
    return (select(ACCEPTANCE)
            .where(_unless("any_workload", at.workload == bindparam("workload")),
                   _unless("any_day", or_(at.expires.is_(None), at.expires >= bindparam("day"))))
            .order_by(at.id))


@_statement
def acceptance() -> Select:
    return select(ACCEPTANCE).where(at.id == bindparam("id"))


# ------------------------------------------------------------------------------------------ the report's trend


@_statement
def workloads() -> Select:
    # GROUP BY, not DISTINCT: the PostgreSQL text selects each row as one JSON array, and PostgreSQL orders
    # a DISTINCT only by what it selects
    return select(bt.workload).group_by(bt.workload).order_by(bt.workload)


@_statement
def trend_baselines() -> Select:
    """What the trend draws of each baseline of a workload (of one branch, when given), oldest first."""
    return (select(bt.id, bt.commit, bt.commit_date, bt.created_at, bt.branch, bt.fingerprint, bt.gpu_count,
                   bt.aligned, bt.iterations_used, bt.window_ns, bt.total_kernel_ns, bt.compute_ns,
                   bt.communication_ns, bt.memory_ns)
            .where(bt.workload == bindparam("workload"), _unless("any_branch", bt.branch == bindparam("branch")))
            .order_by(bt.created_at, bt.id))


@_statement
def kernel_levels() -> Select:
    """(name_id, per_iter_ns) of every kernel row of some baselines: which kernels are large."""
    return select(bk.name_id, bk.per_iter_ns).where(bk.baseline_id.in_(_in("ids")))


@_statement
def name_ids() -> Select:
    return select(kn.id).where(kn.name_hash.in_(_in("hashes")))


@_statement
def names_by_id() -> Select:
    return select(kn.id, kn.name, kn.short_name, kn.category, kn.tc).where(kn.id.in_(_in("ids")))


@_statement
def kernel_series() -> Select:
    """Some kernels' rows over every baseline of a workload (``ix_baseline_kernel_history`` leads with name_id)."""
    return (select(bk.baseline_id, bk.name_id, bk.count, bk.total_ns, bt.gpu_count, bk.iter_ns)
            .join(BASELINE, bt.id == bk.baseline_id)
            .where(bk.name_id.in_(_in("ids")), bt.workload == bindparam("workload")))


@_statement
def leaderboard_view() -> Select:
    return (select(kn.name, kn.short_name, kn.category, kn.tc, bk.per_iter_ns, bk.count_per_iter, bk.avg_ns,
                   bk.share_window, bk.share_kernel, bk.amdahl_ceiling, bk.fragmented, bk.count, bk.total_ns,
                   bk.min_ns, bk.max_ns, bk.median_ns)
            .join(KERNEL_NAME, kn.id == bk.name_id).where(bk.baseline_id == bindparam("id")).order_by(bk.rank))


# ------------------------------------------------------------------------------------------ compiled text


def sqlite_text(name: str) -> str:
    """The statement's SQLite text with named parameters (``:name``; an expanding list stays the
    ``__[POSTCOMPILE_name]`` marker, which ``sqlite_read`` expands per call)."""
    from sqlalchemy.dialects import sqlite

    return str(statement(name).compile(dialect=sqlite.dialect(paramstyle="named")))


MAX_PG_ARGS = 100  # PostgreSQL's limit on a function's arguments (json_build_array's columns)


def postgresql_text(name: str) -> str:
    """The statement's PostgreSQL text for ``pg_read``: the same FROM, WHERE, ORDER and LIMIT, each row
    selected as one JSON array of the statement's columns (``json_build_array``: one value per row to
    fetch, decoded in C), with pyformat parameters (``%(name)s``; lists stay ``__[POSTCOMPILE_name]``)."""
    from sqlalchemy import func
    from sqlalchemy.dialects import postgresql

    query = statement(name)
    columns = list(query.selected_columns)
    if len(columns) > MAX_PG_ARGS or query._distinct:
        raise ValueError(f"statement {name}: over {MAX_PG_ARGS} columns or DISTINCT: not one JSON array a row")
    rows = query.with_only_columns(func.json_build_array(*columns), maintain_column_froms=True)
    return str(rows.compile(dialect=postgresql.dialect(paramstyle="pyformat")))


def result_kinds(name: str) -> str:
    """One letter per column of the statement's rows, for ``pg_read``'s decoding of its JSON arrays:
    ``f`` a float (JSON writes 1.0 as 1), ``x`` bytes (bytea's hex text), ``-`` a value JSON gives as read."""
    from sqlalchemy import Float, LargeBinary

    def kind(column) -> str:
        t = column.type
        return "f" if isinstance(t, Float) else "x" if isinstance(t, LargeBinary) else "-"

    return "".join(kind(c) for c in statement(name).selected_columns)


def read_sql_module() -> str:
    """The text of ``read_sql.py``: every statement compiled for SQLite and for PostgreSQL."""
    names = sorted(STATEMENTS)
    lines = ['"""The SQL text of every read statement (``statements``) for the read-only paths (``sqlite_read``,',
             "``pg_read``), which must not import SQLAlchemy, and the column kinds ``pg_read`` decodes. GENERATED",
             "by ``python -m kbase.store.statements``: do not edit; tests/store/test_read_sql.py holds it equal to",
             'the statements."""', "", "SQL = {", '    "sqlite": {']
    lines += [f"        {name!r}: {sqlite_text(name)!r}," for name in names]
    lines += ["    },", '    "postgresql": {']
    lines += [f"        {name!r}: {postgresql_text(name)!r}," for name in names]
    lines += ["    },", "}", "", "KINDS = {"]
    lines += [f"    {name!r}: {result_kinds(name)!r}," for name in names]
    lines += ["}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    from pathlib import Path

    Path(__file__).with_name("read_sql.py").write_text(read_sql_module(), encoding="utf-8")
