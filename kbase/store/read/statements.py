"""Every read of the store as one SQLAlchemy Core statement: the one source of the store's read SQL.

The store's one reader (``reader.StoreReader``) runs them on a DB-API connection — Python's ``sqlite3`` for
SQLite, psycopg2 for PostgreSQL — as their text for that dialect, compiled once into ``read_sql.py`` by
``python -m kbase.store.read.statements`` (reading imports no SQLAlchemy: ~0.4 s); a test compiles every statement
again and holds that file equal, so the text cannot drift from the models.

Each statement has one shape whatever the caller asks: an optional filter is ``(:any_x OR column = :x)``
and a list is an expanding ``IN`` parameter, so one compiled text serves every call.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

from sqlalchemy import Boolean, bindparam, literal_column, or_, select
from sqlalchemy.sql import Select

from kbase.store.schema.models import ACCEPTANCE, BASELINE, BASELINE_KERNELS, KERNEL_NAME, OP_NAME, WORKLOAD_KERNEL

bt, bk, kn, at, wk = BASELINE.c, BASELINE_KERNELS.c, KERNEL_NAME.c, ACCEPTANCE.c, WORKLOAD_KERNEL.c
opn = OP_NAME.c
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


def _point():
    """What ``kbase steps`` needs of each baseline of a line (``reader.LinePoint``): not the whole row."""
    return select(bt.id, bt.commit, bt.created_at, bt.fingerprint, bt.aligned, bt.window_ns, bt.iterations_used,
                  bt.step_ns, bt.idle_ns, bt.gpu_models, bt.gpu_count, bt.window_spec)


@_statement
def line_points_at() -> Select:
    return _point().where(*_line_where(), bt.commit.in_(_in("commits")))


@_statement
def line_points_newest() -> Select:
    return _first(_point().where(*_line_where()).order_by(bt.created_at.desc(), bt.id.desc()), bindparam("limit"))


# ------------------------------------------------------------------------------------------ export and import
# ``kbase export`` writes every column of a baseline's rows; ``kbase import`` finds stored captures by key.


@_statement
def baseline_ids() -> Select:
    """The ids of every baseline (of one workload), in id order."""
    return select(bt.id).where(_unless("any_workload", bt.workload == bindparam("workload"))).order_by(bt.id)


@_statement
def baselines_by_id() -> Select:
    return select(BASELINE).where(bt.id.in_(_in("ids")))


@_statement
def kernel_rows() -> Select:
    """Whole ``baseline_kernels`` rows of some baselines."""
    return select(BASELINE_KERNELS).where(bk.baseline_id.in_(_in("ids")))


@_statement
def capture_keys() -> Select:
    """(id, workload, commit, sha256, window, copy): the capture key of each baseline at some commits."""
    return (select(bt.id, bt.workload, bt.commit, bt.source_sha256, bt.window_spec, bt.capture_copy)
            .where(bt.commit.in_(_in("commits"))))


# ------------------------------------------------------------------------------------------ kernel tables
# One ``baseline_kernels`` row per baseline: four packed-column blobs (``kernel_blobs``) and the ids of its kernels
# and ops by position. A history read takes ``kernel_ids`` and ``levels`` alone (the row's first two: the rest of
# the row is not read).


@_statement
def kernel_blobs() -> Select:
    """Whole kernel tables of some baselines."""
    return (select(bk.baseline_id, bk.format, bk.kernel_ids, bk.levels, bk.board, bk.samples, bk.sketches)
            .where(bk.baseline_id.in_(_in("ids"))))


@_statement
def level_blobs() -> Select:
    """The ``levels`` of some baselines: (baseline_id, format, kernel_ids, levels)."""
    return select(bk.baseline_id, bk.format, bk.kernel_ids, bk.levels).where(bk.baseline_id.in_(_in("ids")))


@_statement
def board_blobs() -> Select:
    """One baseline's leaderboard columns and samples: (format, levels, board, samples, kernel_ids)."""
    return (select(bk.format, bk.levels, bk.board, bk.samples, bk.kernel_ids)
            .where(bk.baseline_id == bindparam("id")))


@_statement
def op_blobs() -> Select:
    """The kernel time by op of some baselines that store it: (baseline_id, format, op_ids, ops) (``op_blobs``)."""
    return (select(bk.baseline_id, bk.format, bk.op_ids, bk.ops)
            .where(bk.baseline_id.in_(_in("ids")), bk.ops.is_not(None)))


@_statement
def op_level_blobs() -> Select:
    """What each op's time in some baselines needs (history noise): (baseline_id, format, levels, ops) of those
    that store ops."""
    return (select(bk.baseline_id, bk.format, bk.levels, bk.op_ids, bk.ops)
            .where(bk.baseline_id.in_(_in("ids")), bk.ops.is_not(None)))


@_statement
def op_names_by_id() -> Select:
    """(id, op key, op without scope) of some ``op_name`` ids."""
    return select(opn.id, opn.key, opn.op).where(opn.id.in_(_in("ids")))


@_statement
def names_by_id() -> Select:
    return select(kn.id, kn.name, kn.short_name, kn.category, kn.tc, kn.family).where(kn.id.in_(_in("ids")))


@_statement
def name_ids() -> Select:
    return select(kn.id).where(kn.name_hash.in_(_in("hashes")))


@_statement
def kernel_names() -> Select:
    """Names stored (by a workload's baselines: ``workload_kernel``), in id order."""
    used = select(wk.name_id).where(wk.workload == bindparam("workload"))
    return select(kn.name, kn.short_name).where(_unless("any_workload", kn.id.in_(used))).order_by(kn.id)


@_statement
def kernel_history() -> Select:
    """Baselines (oldest first) with their ``kernel_ids`` and ``levels``, for one kernel's history (the commit's
    stored date with them: history needs no second read of the baselines for it)."""
    return (select(bt.id, bt.commit, bt.created_at, bt.workload, bt.branch, bt.commit_date, bt.fingerprint,
                   bt.aligned, bt.gpu_models, bt.gpu_count, bt.window_spec, bk.format, bk.kernel_ids, bk.levels)
            .join(BASELINE_KERNELS, bk.baseline_id == bt.id)
            .where(_unless("any_workload", bt.workload == bindparam("workload")),
                   _unless("any_branch", bt.branch == bindparam("branch")))
            .order_by(bt.created_at, bt.id))


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
    return select(bt.workload).group_by(bt.workload).order_by(bt.workload)


@_statement
def trend_baselines() -> Select:
    """What the trend draws of each baseline of a workload (of one branch, when given), oldest first."""
    return (select(bt.id, bt.commit, bt.commit_date, bt.created_at, bt.branch, bt.fingerprint, bt.gpu_count,
                   bt.aligned, bt.iterations_used, bt.window_ns, bt.total_kernel_ns, bt.compute_ns,
                   bt.communication_ns, bt.memory_ns, bt.kind)
            .where(bt.workload == bindparam("workload"), _unless("any_branch", bt.branch == bindparam("branch")))
            .order_by(bt.created_at, bt.id))


@_statement
def budget_summaries() -> Select:
    """Some baselines' summaries (the report reads the GPU time budget stored in each)."""
    return select(bt.id, bt.summary_json).where(bt.id.in_(_in("ids")))


@_statement
def kernel_series() -> Select:
    """Some baselines with their ``levels`` and ``samples`` (the report's kernel series)."""
    return (select(bk.baseline_id, bt.gpu_count, bk.format, bk.kernel_ids, bk.levels, bk.samples)
            .join(BASELINE, bt.id == bk.baseline_id).where(bk.baseline_id.in_(_in("ids"))))


# ------------------------------------------------------------------------------------------ compiled text


def sqlite_text(name: str) -> str:
    """The statement's SQLite text with named parameters (``:name``; an expanding list stays the
    ``__[POSTCOMPILE_name]`` marker, which ``reader.bind`` expands per call)."""
    from sqlalchemy.dialects import sqlite

    return str(statement(name).compile(dialect=sqlite.dialect(paramstyle="named")))


def postgresql_text(name: str) -> str:
    """The statement's PostgreSQL text with pyformat parameters (``%(name)s``, as psycopg2 takes them; an
    expanding list stays the ``__[POSTCOMPILE_name]`` marker)."""
    from sqlalchemy.dialects import postgresql

    return str(statement(name).compile(dialect=postgresql.dialect(paramstyle="pyformat")))


def read_sql_module() -> str:
    """The text of ``read_sql.py``: every statement compiled for SQLite and for PostgreSQL."""
    names = sorted(STATEMENTS)
    lines = ['"""The SQL text of every read statement (``statements``) for each dialect, as the store\'s reader',
             "(``reader.StoreReader``) runs it without importing SQLAlchemy. GENERATED by",
             "``python -m kbase.store.read.statements``: do not edit; tests/store/test_read_sql.py holds it equal",
             "to the statements.",
             '"""', "", "SQL = {", '    "sqlite": {']
    lines += [f"        {name!r}: {sqlite_text(name)!r}," for name in names]
    lines += ["    },", '    "postgresql": {']
    lines += [f"        {name!r}: {postgresql_text(name)!r}," for name in names]
    lines += ["    },", "}", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    from pathlib import Path

    Path(__file__).with_name("read_sql.py").write_text(read_sql_module(), encoding="utf-8")
