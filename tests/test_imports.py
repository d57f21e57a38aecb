"""Each command imports only what it uses: the store's reading commands (list, show, history) never
load pandas, pyarrow or numpy (history's step detection is plain Python), nor SQLAlchemy/SQLModel on a
store at the head schema (SQLite or PostgreSQL: the store's one reader runs on sqlite3 or psycopg2), a diff,
gate or steps of stored baselines loads no pandas or pyarrow, ``--help`` loads neither the store stack nor the
data stack, JSON / CSV /
Markdown outputs never load the terminal stack (rich), and outside a git repository no command loads GitPython.

Each case runs the real CLI entry point in a fresh interpreter (``kbase.cli.main``, as the ``kbase``
script does) and then reports which of the heavy modules ended up in ``sys.modules``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.bulk_stores import bulk_store
from helpers.imports import HEAVY, loaded
from helpers.library import old_schema_copy

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> tuple[str, str, Path]:
    root = tmp_path_factory.mktemp("imports")
    url, name = bulk_store(root, ("bulk", 5, 6, 4))
    return url, name, root


DATA_STACK = {"pandas", "pyarrow", "numpy", "scipy"}
STORE_STACK = {"sqlalchemy", "sqlmodel", "alembic"}


@pytest.mark.parametrize("args", [
    ("list",), ("list", "--format", "json"), ("history", "{name}"), ("history", "{name}", "--format", "json"),
    ("history", "{name}", "--format", "csv"), ("show", "@1"), ("show", "@2", "--format", "json"),
    ("show", "@1", "--format", "csv"), ("show", "@1", "--format", "md"), ("show", "@1", "--format", "bmf"),
    ("show", "@1", "--format", "github-benchmark"),
])
def test_store_reading_commands_load_neither_the_store_nor_the_data_stack(small_store, args):
    """On a SQLite store at the head schema, list / show / history read through the store's one reader (sqlite3):
    SQLAlchemy, SQLModel and pandas (~1 s of imports together) are never loaded."""
    url, name, root = small_store
    argv = [a.format(name=name) for a in args]
    rc, heavy = loaded(*argv, "--db", url, cwd=root)
    assert rc == 0
    assert not heavy & DATA_STACK, f"kbase {' '.join(args[:1])} loaded {sorted(heavy & DATA_STACK)}"
    assert not heavy & STORE_STACK, f"kbase {' '.join(args[:1])} loaded {sorted(heavy & STORE_STACK)}"
    assert "pydantic" not in heavy, "Typer >= 0.29 coerces parameters through pydantic (~0.09 s; pinned below it)"


@pytest.mark.parametrize("args", [("db", "current"), ("db", "upgrade")])
def test_db_commands_do_not_load_the_data_stack(small_store, args):
    url, _, root = small_store
    rc, heavy = loaded(*args, "--db", url, cwd=root)
    assert rc == 0
    assert not heavy & DATA_STACK, f"kbase {' '.join(args)} loaded {sorted(heavy & DATA_STACK)}"
    assert "sqlalchemy" in heavy


def test_help_loads_neither_the_store_nor_the_data_stack(tmp_path):
    rc, heavy = loaded("--help", cwd=tmp_path)
    assert rc == 0
    assert not heavy, f"kbase --help loaded {sorted(heavy)}"


def test_old_schema_store_is_migrated_then_read(small_store, tmp_path):
    """A store one revision behind is migrated on use as before (Alembic), then read by the one reader; at the
    head, no store stack again (the probe does see what a command imports)."""
    url, _, _ = small_store
    old = old_schema_copy(url, tmp_path / "old.db")
    rc, heavy = loaded("list", "--db", old, cwd=tmp_path)
    assert rc == 0 and {"sqlalchemy", "alembic"} <= heavy
    rc, heavy = loaded("list", "--db", old, cwd=tmp_path)  # now at the head: the fast path again
    assert rc == 0 and not heavy & STORE_STACK


def test_show_of_a_revision_reads_through_the_same_reader(small_store):
    """``show REV`` is resolved by the same reader as ``show @ID`` (here: no repository, exit 2)."""
    url, _, root = small_store
    rc, heavy = loaded("show", "HEAD", "--db", url, cwd=root)
    assert rc == 2 and not heavy & (STORE_STACK | DATA_STACK), sorted(heavy)


@pytest.mark.parametrize("args", [("diff", "@1", "@2"), ("diff", "@2", "@5", "--format", "json"), ("gate", "@1", "@2"),
                                  ("gate", "@4", "@5", "--format", "md")])
def test_stored_diff_and_gate_load_no_store_stack(small_store, args):
    """On a SQLite store at the head schema, ``diff`` / ``gate`` of stored baselines read through the store's
    reader (sqlite3): SQLAlchemy, SQLModel and Alembic (~0.4 s) are never loaded, and the comparison is numpy
    only: no pandas or pyarrow (~0.3 s)."""
    url, _, root = small_store
    rc, heavy = loaded(*args, "--db", url, "--name", "bulk", cwd=root)
    assert rc in (0, 1)
    assert not heavy & STORE_STACK, f"kbase {' '.join(args)} loaded {sorted(heavy & STORE_STACK)}"
    assert not heavy & {"pandas", "pyarrow", "pydantic"}, f"kbase {' '.join(args)} loaded {sorted(heavy)}"
    assert "git" not in heavy, "outside a git repository GitPython is not imported (history in creation order)"


PG_READS = [("list",), ("show", "@1"), ("show", "@2", "--format", "json"), ("history", "{name}"),
            ("history", "{name}", "--format", "json"), ("steps", "--name", "bulk"), ("diff", "@1", "@2", "--name", "bulk"),
            ("diff", "@2", "@5", "--format", "json", "--name", "bulk"), ("gate", "@4", "@5", "--name", "bulk")]


@pytest.fixture(scope="module")
def small_pg_store(small_store, pg_copy_of) -> tuple[str, str, Path]:
    """``small_store`` copied into a PostgreSQL database (skipped with the reason where no server can run)."""
    url, name, root = small_store
    return pg_copy_of(url), name, root


@pytest.mark.parametrize("args", PG_READS)
def test_postgresql_reads_load_neither_the_store_stack_nor_pandas(small_pg_store, args):
    """On a PostgreSQL store at the head schema the same commands read through the store's one reader on
    psycopg2: neither SQLAlchemy, SQLModel nor Alembic (~0.45 s of imports together), and no pandas or pyarrow;
    list, show and history no numpy either; nor psycopg 3 (~0.18 s of imports against psycopg2's ~0.04 s)."""
    url, name, root = small_pg_store
    argv = [a.format(name=name) for a in args]
    rc, heavy = loaded(*argv, "--db", url, cwd=root, watch=(*HEAVY, "psycopg", "psycopg2"))
    assert rc in (0, 1) and "psycopg2" in heavy and "psycopg" not in heavy
    assert not heavy & (STORE_STACK | {"pandas", "pyarrow", "pydantic"}), f"kbase {args[0]}: {sorted(heavy)}"
    if args[0] in ("list", "show", "history"):
        assert not heavy & DATA_STACK, f"kbase {args[0]} loaded {sorted(heavy & DATA_STACK)}"
    assert "git" not in heavy


def test_steps_on_sqlite_loads_no_store_stack(small_store):
    """``kbase steps`` reads through the same reader (no SQLAlchemy), its detection in numpy."""
    url, _, root = small_store
    rc, heavy = loaded("steps", "--name", "bulk", "--db", url, cwd=root)
    assert rc == 0 and not heavy & (STORE_STACK | {"pandas", "pyarrow"}), sorted(heavy)


MACHINE_FORMATS = [(("diff", "@1", "@2"), f) for f in ("json", "csv", "md")] + [
    (("gate", "@4", "@5"), f) for f in ("json", "md")] + [(("list",), "json")] + [
    (("show", "@1"), f) for f in ("json", "csv", "md")] + [(("history", "{name}"), f) for f in ("json", "csv")]


@pytest.mark.parametrize(("args", "fmt"), MACHINE_FORMATS)
def test_machine_readable_outputs_do_not_load_rich(small_store, args, fmt):
    """JSON, CSV and Markdown go through ``render.safe`` and the writers, never the terminal stack (rich:
    ~35 ms); the screen table does load it (the probe sees it)."""
    url, name, root = small_store
    argv = [a.format(name=name) for a in args] + ["--db", url] + (["--name", "bulk"] if args[0] in ("diff", "gate")
                                                                  else [])
    rc, heavy = loaded(*argv, "--format", fmt, cwd=root, watch=("rich",))
    assert rc in (0, 1) and "rich" not in heavy, f"kbase {args[0]} --format {fmt}: exit {rc}, loaded {heavy}"
    rc, heavy = loaded(*argv, cwd=root, watch=("rich",))
    assert rc in (0, 1) and "rich" in heavy


@pytest.mark.parametrize("fmt", ["table", "json", "csv", "md", "bmf"])
def test_top_of_an_nsys_export_loads_no_pandas_or_pyarrow(tmp_path, fmt):
    """read -> window -> leaderboard on numpy columns: ``kbase top`` of an export is numpy and sqlite3 only
    (pandas with pyarrow is ~0.2 s, nearly half of a small export's answer); the tables are decoded from
    the file's pages, so not even pyarrow/ADBC is loaded."""
    from helpers.tiny_export import make_tiny_export

    export = make_tiny_export(tmp_path / "tiny.sqlite")
    rc, heavy = loaded("top", str(export), "--no-store", "--format", fmt, cwd=tmp_path)
    assert rc == 0 and not heavy & {"pandas", "pyarrow", "sqlalchemy", "pydantic"}, f"{fmt}: loaded {sorted(heavy)}"
    if fmt == "json":
        rc, heavy = loaded("top", str(export), "--no-store", "--per-gpu", "--format", fmt, cwd=tmp_path)
        assert rc == 0 and "pandas" not in heavy


def test_top_of_a_large_nsys_export_loads_no_pyarrow(tmp_path):
    """Past ``SMALL_TABLE_ROWS`` the kernel and runtime tables are decoded from the file's pages in numpy
    (``readers/sqlite_pages/``): no pyarrow or ADBC either."""
    import sqlite3

    from kbase.readers.sqlite_columns import SMALL_TABLE_ROWS
    from kbase.synth.generate import ExportSpec, generate_export

    export = generate_export(tmp_path / "large.sqlite", ExportSpec(n_gpus=2, iterations=4, seed=2)).path
    con = sqlite3.connect(export)
    assert con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0] > SMALL_TABLE_ROWS
    con.close()
    rc, heavy = loaded("top", str(export), "--no-store", cwd=tmp_path,
                       watch=("pandas", "pyarrow", "adbc_driver_manager", "adbc_driver_sqlite", "numpy.ma"))
    assert rc == 0 and not heavy, sorted(heavy)  # (numpy.ma: np.unique and np.isin import it, ~10 ms)


def test_snapshot_of_an_nsys_export_loads_no_pandas(tmp_path):
    """The store writes a computed leaderboard from its numpy columns (``codec.kernel_table``,
    ``kernel_naming``) on the driver (``store.writer``): a snapshot loads neither pandas nor the store stack."""
    from helpers.tiny_export import make_tiny_export

    export = make_tiny_export(tmp_path / "tiny.sqlite")
    rc, heavy = loaded("snapshot", str(export), "--db", f"sqlite:///{tmp_path / 'kb.db'}", "--no-git", "--rev", "c" * 40,
                       "-q", cwd=tmp_path)
    assert rc == 0 and not heavy & ({"pandas", "pyarrow"} | STORE_STACK), sorted(heavy)
