"""Migrations: Alembic head, upgrades that keep every row, downgrade/upgrade round trips."""


def test_head_revision_read_from_the_scripts_is_alembics_head():
    """``schema_names.head_revision`` (read from the scripts without Alembic) lets a command skip importing
    Alembic; it must be the real head, of the one migrations folder alembic.ini names too."""
    import configparser
    from pathlib import Path

    from alembic.script import ScriptDirectory

    from kbase.store.engine import alembic_config
    from kbase.store.schema.schema_names import head_revision, migrations_dir

    assert ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head() == head_revision()
    repo = Path(__file__).resolve().parents[2]
    assert migrations_dir() == repo / "migrations"  # the top-level folder of the design card
    ini = configparser.ConfigParser()
    ini.read(repo / "alembic.ini")
    assert (repo / ini["alembic"]["script_location"]).resolve() == migrations_dir()
    assert not (repo / "kbase" / "store" / "migrations").exists() and not (repo / "kbase" / "migrations").exists()


def test_head_revision_follows_the_scripts(tmp_path, monkeypatch):
    """A new script is the new head with no constant to edit; two heads are refused, not guessed."""
    import shutil

    from kbase.store.schema import schema_names

    fake = tmp_path / "migrations"
    shutil.copytree(schema_names.migrations_dir(), fake)
    head = schema_names.head_revision()
    (fake / "versions" / "0099_next.py").write_text(f'revision: str = "0099"\ndown_revision: str | None = "{head}"\n')
    monkeypatch.setattr(schema_names, "migrations_dir", lambda: fake)
    schema_names.head_revision.cache_clear()
    try:
        assert schema_names.head_revision() == "0099"
        (fake / "versions" / "0100_fork.py").write_text(f'revision = "0100"\ndown_revision = "{head}"\n')
        schema_names.head_revision.cache_clear()
        with pytest.raises(schema_names.StoreError, match="2 heads"):
            schema_names.head_revision()
    finally:
        schema_names.head_revision.cache_clear()


import pytest
from sqlalchemy import text

from kbase.gitrepo import CommitInfo
from kbase.readers import source
from kbase.store import engine as kdb
from kbase.store import open_store as store_open
from kbase.store.write import queries
from kbase.synth.generate import ExportSpec, generate_export

from helpers.kernel_tables import assert_same_kernels, downgrade, dump_kernels

pytestmark = pytest.mark.slow

FIRST = "0001"


@pytest.fixture(scope="module")
def two_leaderboards(tmp_path_factory):
    """Two small real leaderboards (from generated exports) to fill a store with."""
    from kbase.analysis.leaderboard import build_leaderboard
    from kbase.analysis.window import WindowSpec, select_window
    from kbase.readers import read_profile

    out = []
    d = tmp_path_factory.mktemp("mig")
    for seed in (1, 2):
        path = d / f"run{seed}.sqlite"
        generate_export(path, ExportSpec(n_gpus=2, iterations=5, seed=seed))
        lb = build_leaderboard(select_window(read_profile(path), WindowSpec()))
        out.append((path, lb))
    return out


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("pg_db_url")


def _fill(engine, url, leaderboards) -> list[int]:
    ids = []
    for i, (path, lb) in enumerate(leaderboards):
        commit = CommitInfo(hash=f"{i + 1:040x}", date=None, branch="main", detached=False, dirty=False)
        src = source.describe_source(path, "nsys-sqlite")
        ids.append(queries.save_leaderboard(engine, lb, workload="w", commit=commit, source=src,
                                          window_spec="spec", url=url).baseline.id)
    return ids


ADDED_LATER = {"capture_copy", "launch_sketch", "source_mtime_ns", "source_probe", "kind", "step_ns", "idle_ns",
               "capture_span"}  # columns of later revisions


def _dump(engine) -> dict:
    """Every row of the baseline and name tables (columns of the first revision), for before/after comparison;
    the kernel data as ``kernel_tables.dump_kernels`` reads it from either layout."""
    out: dict = {}
    with engine.connect() as conn:
        for table in ("baseline", "kernel_name"):
            res = conn.execute(text(f"SELECT * FROM {table} ORDER BY id"))
            keep = [i for i, k in enumerate(res.keys()) if k not in ADDED_LATER]
            out[table] = [tuple(r[i] for i in keep) for r in res.fetchall()]
    return out | {"kernels": dump_kernels(engine)}


def _same(a: dict, b: dict) -> None:
    assert a["baseline"] == b["baseline"] and a["kernel_name"] == b["kernel_name"]
    assert_same_kernels(a["kernels"], b["kernels"])


def test_store_made_at_first_revision_is_upgraded_with_every_row_kept(url, two_leaderboards):

    engine = kdb.make_engine(url)
    kdb.upgrade(engine, url)
    ids = _fill(engine, url, two_leaderboards)
    downgrade(engine, url, FIRST)  # the rows as a first-revision store holds them
    assert kdb.schema_state(engine, url)[0] == FIRST
    with engine.begin() as conn:  # and a duplicate capture, as concurrent snapshots could leave one then
        cols = [c for c in conn.execute(text("SELECT * FROM baseline")).keys() if c != "id"]
        names = ", ".join(f'"{c}"' for c in cols)
        conn.execute(text(f"INSERT INTO baseline ({names}) SELECT {names} FROM baseline WHERE id = {ids[0]}"))
    before = _dump(engine)
    engine.dispose()

    engine = kdb.open_store(url).engine  # a newer kbase opens it: upgraded to head automatically
    current, head, _ = kdb.schema_state(engine, url)
    assert current == head == kdb.head_revision()
    _same(before, _dump(engine))
    with engine.connect() as conn:  # every row kept; the duplicate is copy 1 of the same capture
        copies = conn.execute(text("SELECT id, capture_copy FROM baseline ORDER BY id")).fetchall()
    assert [c for _, c in copies] == [0, 0, 1]
    with kdb.open_store(url, readonly=True) as st:
        for bid, (_, lb) in zip(ids, two_leaderboards):
            stored = st.reader.leaderboard(st.reader.baseline(bid))
            assert [r["name"] for r in stored.rows] == list(lb.table["name"])
            assert [r["total_ns"] for r in stored.rows] == list(lb.table["total_ns"])
    with engine.connect() as conn:  # the new table works
        assert conn.execute(text("SELECT count(*) FROM acceptance")).scalar_one() == 0
    engine.dispose()


def test_downgrade_upgrade_round_trips(url, two_leaderboards):

    _st = store_open(url)

    engine, _ = _st.engine, _st.url
    _fill(engine, url, two_leaderboards)
    before = _dump(engine)
    downgrade(engine, url, FIRST)
    assert kdb.schema_state(engine, url)[0] == FIRST
    _same(before, _dump(engine))  # kernel tables back to rows; then every revision's own columns dropped
    kdb.upgrade(engine, url)
    assert kdb.schema_state(engine, url)[0] == kdb.head_revision()
    assert _dump(engine)["kernels"].keys() == before["kernels"].keys()
    _same(before, _dump(engine))
    downgrade(engine, url, "base")
    assert kdb.schema_state(engine, url)[0] is None
    kdb.upgrade(engine, url)
    assert kdb.schema_state(engine, url)[0] == kdb.head_revision()
    engine.dispose()


def test_0012_gives_every_stored_baseline_the_kind_snapshot(url, two_leaderboards):
    """A store of 0011 holds snapshots only: after 0012 each says so; a bisect midpoint keeps its kind through a
    downgrade-upgrade of the other revisions' columns, and 0012's downgrade drops the column alone."""
    engine = kdb.make_engine(url)
    kdb.upgrade(engine, url)
    _fill(engine, url, two_leaderboards)
    downgrade(engine, url, "0011")
    with engine.connect() as conn:
        assert "kind" not in conn.execute(text("SELECT * FROM baseline")).keys()
    kdb.upgrade(engine, url)
    with engine.connect() as conn:
        assert [r[0] for r in conn.execute(text("SELECT kind FROM baseline ORDER BY id"))] == ["snapshot"] * 2
    engine.dispose()


def test_0013_adds_the_capture_span_and_its_downgrade_drops_it_alone(url, tmp_path):
    """A store of 0012 did not look at the capture's span: after 0013 its baselines read NULL (unknown); a baseline
    stored at head holds its summary's span (a whole-program capture, a slice of one)."""
    from kbase.analysis.leaderboard import build_leaderboard
    from kbase.analysis.window import WindowSpec, select_window
    from kbase.readers import read_profile
    from kbase.synth.fixed_work import FixedKernel, FixedWorkSpec, generate_fixed_work

    kernels = [FixedKernel("void solver_kernel(int*)", "solver_kernel", 40, 200_000)]
    boards = []
    for i, kw in enumerate(({}, {"slice_ns": 2_000_000})):
        path = generate_fixed_work(tmp_path / f"fw{i}.sqlite", FixedWorkSpec(kernels, seed=i, **kw))
        boards.append((path, build_leaderboard(select_window(read_profile(path), WindowSpec()))))
    engine = kdb.make_engine(url)
    kdb.upgrade(engine, url)
    _fill(engine, url, boards)
    with engine.connect() as conn:
        stored = [r[0] for r in conn.execute(text("SELECT capture_span FROM baseline ORDER BY id"))]
    assert stored == ["program", "slice"]
    downgrade(engine, url, "0012")
    with engine.connect() as conn:
        keys = conn.execute(text("SELECT * FROM baseline")).keys()
        assert "capture_span" not in keys and "kind" in keys
    kdb.upgrade(engine, url)
    with engine.connect() as conn:
        assert [r[0] for r in conn.execute(text("SELECT capture_span FROM baseline ORDER BY id"))] == [None, None]
    engine.dispose()
