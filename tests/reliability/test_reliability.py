"""Issue #6, bad-input matrix: every bad input is exit code 2, exactly one line on stderr
(``kbase: error: …``) naming the file or value and what is wrong, no traceback — and the store is
left byte for byte as it was (SQLite: sha256 of the database file and its ``-wal``; PostgreSQL:
every row of every table).

Each case runs against a store that already holds a baseline, on SQLite and (where a server can
run, see ``tests/pg.py``) PostgreSQL. Most cases run in this process (``conftest.run_kbase``); the
ones where process-level behaviour matters (a lock held by another process, the busy timeout read
at import, an unreachable server) run ``python -m kbase.cli`` as a child.

Already covered elsewhere with the same checks, so not repeated here:

- ``tests/test_top_errors.py``: the same bad profiles for ``kbase top`` (one line, exit 2, input
  untouched); here they go through ``kbase snapshot`` with a store present, which is new.
- ``tests/store/baselines/test_store_commands.py::test_store_from_newer_kbase_is_refused_untouched``: a store stamped with
  Alembic revision ``9999`` is refused by snapshot/list/show/db upgrade, one line, exit 2, store
  bytes (SQLite) and rows (PostgreSQL) unchanged.
- ``tests/store/baselines/test_snapshot_round_trip.py::test_outside_git_repository_and_no_git`` and ``test_git_facts``: no git
  repository / detached HEAD on an empty store (repeated here with a baseline present).
- ``tests/test_gate.py::test_exit_2_missing_baseline_and_unknown_revision`` and
  ``test_malformed_gate_config_exit_2``: gate on unknown revisions / a bad ``[tool.kbase.gate]``.

Helpers shared by the other ``test_reliability_*.py`` files live here (``store_state``,
``assert_bad_input``, ``git``, ``make_repo``).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kbase.store import open_store as store_open
from kbase.store.write import queries

from helpers import pg
from helpers.cli import run_kbase
from helpers.library import snap
from helpers.shared import REPO
from helpers.tiny_export import export_ddl, make_tiny_export

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

# --------------------------------------------------------------------------- shared helpers

_RESOURCE_WARNING = re.compile(r"^\S.*: ResourceWarning: .*\n(?:[ \t]+.*\n)?", re.M)


def error_lines(stderr: str) -> list[str]:
    """stderr's lines, less ResourceWarnings of connections an earlier in-process command left to
    the garbage collector (a real process exits instead)."""
    return _RESOURCE_WARNING.sub("", stderr).splitlines()


def kb(*args, subprocess: bool = False, cwd: Path | None = None):
    """``kbase ARGS`` (in this process unless ``subprocess``), optionally from ``cwd``."""
    if any(str(a).startswith("postgresql") for a in args):
        # close PostgreSQL connections earlier in-process commands left to the garbage collector,
        # so that their ResourceWarnings are not printed into this command's stderr
        gc.collect()
    with contextlib.chdir(cwd) if cwd is not None else contextlib.nullcontext():
        return run_kbase(*args, subprocess=subprocess)


def kb_proc(*args, cwd: Path = REPO, env: dict | None = None, timeout: float = 180):
    """``python -m kbase.cli ARGS`` as a child process with extra environment."""
    full = {k: v for k, v in os.environ.items() if k not in ("KBASE_DB", "KBASE_DEBUG")}
    full["PYTHONPATH"] = str(REPO) + (os.pathsep + full["PYTHONPATH"] if full.get("PYTHONPATH") else "")
    full.setdefault("COLUMNS", "200")
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "kbase.cli", *map(str, args)], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def assert_bad_input(res, *mentions: str) -> str:
    """Exit 2, one ``kbase: error:`` line naming every one of ``mentions``, no traceback."""
    rc = getattr(res, "rc", None)
    rc = res.returncode if rc is None else rc
    text = f"rc={rc}\nstdout: {res.stdout[:2000]}\nstderr: {res.stderr}"
    assert rc == 2, text
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, text
    lines = error_lines(res.stderr)
    assert len(lines) == 1, text
    line = lines[0]
    assert line.startswith("kbase: error: ") and len(line) > len("kbase: error: ") + 5, text
    for m in mentions:
        assert m in line, f"{m!r} not in {line!r}"
    return line


def git(repo: Path, *args: str, check: bool = True) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="kbase test", GIT_AUTHOR_EMAIL="t@kbase.invalid",
               GIT_COMMITTER_NAME="kbase test", GIT_COMMITTER_EMAIL="t@kbase.invalid")
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, timeout=60)
    if check:
        assert out.returncode == 0, f"git {' '.join(args)}: {out.stderr}"
    return out.stdout.strip()


def make_repo(path: Path, commits: int = 3) -> Path:
    """A repository on ``main`` with ``commits`` commits."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "commit.gpgsign", "false")
    for i in range(commits):
        (path / "train.py").write_text(f"step = {i}\n")
        git(path, "add", "train.py")
        git(path, "commit", "-q", "-m", f"commit {i}")
    return path


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pg_rows(url: str) -> dict[str, list]:
    """Every row of every table of the PostgreSQL database (public schema), in a stable order."""
    import psycopg

    out: dict[str, list] = {}
    with psycopg.connect(pg.psycopg_dsn(url), autocommit=True, connect_timeout=10) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
            "AND table_type = 'BASE TABLE' ORDER BY table_name")]
        for t in tables:
            ncol = conn.execute("SELECT count(*) FROM information_schema.columns "
                                "WHERE table_schema = 'public' AND table_name = %s", (t,)).fetchone()[0]
            order = ", ".join(str(i) for i in range(1, ncol + 1))
            out[t] = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)
                      for row in conn.execute(f'SELECT * FROM "{t}" ORDER BY {order}')]
    return out


def store_state(url: str):
    """What must not change: SQLite — sha256 of the database file and of a non-empty ``-wal``;
    PostgreSQL — every row of every table."""
    if url.startswith("sqlite:///"):
        # connections earlier in-process commands left open: closed now, so a checkpoint cannot
        # happen between the two measurements
        gc.collect()
        path = Path(url[len("sqlite:///"):])
        wal = path.with_name(path.name + "-wal")
        state = {"db": sha256_bytes(path.read_bytes()) if path.exists() else None}
        if wal.exists() and wal.stat().st_size:
            state["wal"] = sha256_bytes(wal.read_bytes())
        return state
    return pg_rows(url)


def baseline_count(url: str) -> int:
    from sqlalchemy import create_engine, text

    from kbase.store.engine import normalize_url

    engine = create_engine(normalize_url(url))
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT count(*) FROM baseline")).scalar()
    finally:
        engine.dispose()


# --------------------------------------------------------------------------- the world

class World:
    def __init__(self, root: Path):
        self.root = root
        self.repo = make_repo(root / "repo", commits=3)
        self.tiny = make_tiny_export(root / "tiny.sqlite", steps=4)
        self.nongit = root / "nowhere"
        self.nongit.mkdir()
        self.stores: dict[str, str] = {}

    def head(self, rev: str = "HEAD") -> str:
        return git(self.repo, "rev-parse", rev)


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    return World(tmp_path_factory.mktemp("reliability"))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for var in ("KBASE_DB", "KBASE_DEBUG", "KBASE_BUSY_TIMEOUT", "GITHUB_STEP_SUMMARY"):
        monkeypatch.delenv(var, raising=False)


def _seed_store(world: World, url: str) -> str:
    """One baseline (workload ``w``) of the tiny export at HEAD~1 and one at HEAD."""

    for rev in ("HEAD~1", "HEAD"):
        res = snap(world.tiny, name="w", db=url, repo=world.repo, rev=rev)
        assert res.created
    assert baseline_count(url) == 2
    return url


@pytest.fixture(scope="module")
def sqlite_store(world) -> str:
    url = f"sqlite:///{world.root / 'store' / 'kbase.db'}"
    return _seed_store(world, url)


@pytest.fixture(scope="module")
def pg_store(world, pg_url) -> str:
    url = pg.create_database(pg_url, prefix="rel_")
    try:
        yield _seed_store(world, url)
    finally:
        gc.collect()
        pg.drop_database(pg_url, url)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request) -> str:
    return request.getfixturevalue("sqlite_store" if request.param == "sqlite" else "pg_store")


# --------------------------------------------------------------------------- bad profiles via snapshot
# Each builder: (scratch dir, world) -> (arguments after "snapshot", strings the error line names).


def missing_path(d: Path, w: World):
    p = d / "missing.sqlite"
    return [p], [str(p), "no such file"]


def directory(d: Path, w: World):
    p = d / "adir"
    p.mkdir()
    return [p], [str(p), "directory"]


def zero_bytes(d: Path, w: World):
    p = d / "zero.sqlite"
    p.write_bytes(b"")
    return [p], [str(p), "empty"]


def truncated_sqlite(d: Path, w: World):
    full = make_tiny_export(d / "full.sqlite", pad_rows=100)
    p = d / "truncated.sqlite"
    p.write_bytes(full.read_bytes()[:8192])
    full.unlink()
    return [p], [str(p)]


def random_bytes(d: Path, w: World):
    p = d / "random.sqlite"
    p.write_bytes(random.Random(6).randbytes(4096))
    return [p], [str(p), "not a SQLite database"]


def sqlite_not_nsys(d: Path, w: World):
    p = d / "other.sqlite"
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE measurements (t INTEGER, value REAL)")
    conn.execute("INSERT INTO measurements VALUES (1, 2.5)")
    conn.commit()
    conn.close()
    return [p], [str(p), "not an Nsight Systems export"]


def empty_kernel_table(d: Path, w: World):
    p = d / "nokernels.sqlite"
    conn = sqlite3.connect(p)
    for sql in export_ddl(["StringIds", "CUPTI_ACTIVITY_KIND_KERNEL",
                           "CUPTI_ACTIVITY_KIND_RUNTIME"]).values():
        conn.execute(sql)
    conn.execute("INSERT INTO StringIds (id, value) VALUES (1, 'cudaLaunchKernel')")
    conn.commit()
    conn.close()
    return [p], [str(p), "empty"]


def no_string_ids(d: Path, w: World):
    p = make_tiny_export(d / "nostrings.sqlite", string_ids=False)
    return [p], [str(p), "StringIds"]


def marker_without_nvtx(d: Path, w: World):
    p = make_tiny_export(d / "nonvtx.sqlite", nvtx=False)
    return [p, "--marker", "^ProfilerStep"], [str(p), "^ProfilerStep", "no NVTX"]


def marker_matching_nothing(d: Path, w: World):
    return [w.tiny, "--marker", "^no_such_range$"], ["^no_such_range$", "matches no range"]


def iterations_out_of_range(d: Path, w: World):
    return [w.tiny, "--iterations", "50:60"], ["50:60"]


def iterations_reversed(d: Path, w: World):
    return [w.tiny, "--iterations", "3:1"], ["3:1"]


def trim_outside_capture(d: Path, w: World):
    return [w.tiny, "--trim", "50", "60"], ["--trim", "50"]


def gpu_not_present(d: Path, w: World):
    return [w.tiny, "--gpu", "7"], ["--gpu 7"]


def unknown_format(d: Path, w: World):
    return [w.tiny, "--format", "xml"], ["xml"]


PROFILE_CASES = [
    missing_path, directory, zero_bytes, truncated_sqlite, random_bytes, sqlite_not_nsys, empty_kernel_table,
    no_string_ids, marker_without_nvtx, marker_matching_nothing, iterations_out_of_range, iterations_reversed,
    trim_outside_capture, gpu_not_present, unknown_format,
]


@pytest.mark.parametrize("build", [pytest.param(b, id=b.__name__.replace("_", "-")) for b in PROFILE_CASES])
def test_bad_profile_snapshot_leaves_store_unchanged(build, store_url, world, tmp_path):
    args, mentions = build(tmp_path, world)
    before = store_state(store_url)
    files = sorted(p.name for p in tmp_path.iterdir())
    res = kb("snapshot", *args, "--db", store_url, "--repo", world.repo, "--name", "w")
    assert_bad_input(res, *mentions)
    assert res.stdout == ""
    assert store_state(store_url) == before, "the store changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == files, "kbase wrote beside the profile"


@pytest.mark.slow
def test_bad_profile_snapshot_as_a_process(sqlite_store, world, tmp_path):
    """The same contract from the real program (no in-process shortcuts)."""
    args, mentions = truncated_sqlite(tmp_path, world)
    before = store_state(sqlite_store)
    res = kb_proc("snapshot", *args, "--db", sqlite_store, "--repo", world.repo)
    assert_bad_input(res, *mentions)
    assert store_state(sqlite_store) == before


# --------------------------------------------------------------------------- git and baseline references


@pytest.mark.slow
def test_unknown_revision_diff_gate_snapshot(store_url, world):
    before = store_state(store_url)
    db = ("--db", store_url, "--repo", world.repo, "--name", "w")
    for args in (("diff", "no-such-rev", "HEAD"), ("gate", "HEAD", "no-such-rev"),
                 ("snapshot", world.tiny, "--rev", "no-such-rev", "--force")):
        res = kb(*args, *db)
        assert_bad_input(res, "unknown git revision 'no-such-rev'")
        assert store_state(store_url) == before, args


def test_not_a_git_repository(store_url, world):
    before = store_state(store_url)
    res = kb("snapshot", world.tiny, "--db", store_url, "--repo", world.nongit, "--force")
    assert_bad_input(res, str(world.nongit), "not a git repository")
    res = kb("gate", "--db", store_url, "--repo", world.nongit, "--name", "w")
    assert_bad_input(res, "not a git repository")
    assert store_state(store_url) == before


@pytest.fixture(scope="module")
def shallow(world) -> Path:
    """``git clone --depth 1`` of the world repository: HEAD's parent is not there."""
    dest = world.root / "shallow"
    out = subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{world.repo}", str(dest)],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (dest / ".git" / "shallow").exists()
    return dest


def test_shallow_clone_without_head_parent(store_url, world, shallow):
    before = store_state(store_url)
    db = ("--db", store_url, "--repo", shallow, "--name", "w")
    # default gate: HEAD~1 vs HEAD, and HEAD~1 is cut off
    res = kb("gate", *db)
    line = assert_bad_input(res, "HEAD~1")
    assert "shallow" in line
    res = kb("diff", "HEAD~1", "HEAD", *db)
    assert_bad_input(res, "HEAD~1", "shallow")
    res = kb("snapshot", world.tiny, "--rev", "HEAD~1", *db)
    assert_bad_input(res, "HEAD~1", "shallow")
    assert store_state(store_url) == before


def test_shallow_clone_ancestry_walk_stops_at_the_cut(store_url, world, shallow):
    """HEAD exists but has no baseline of workload ``nope``, which the store has never held: one clear line
    (the workload is unknown: issue 38), never a crash on the shallow clone's missing parent."""
    before = store_state(store_url)
    res = kb("diff", "@1", "HEAD", "--db", store_url, "--repo", shallow, "--name", "nope")
    assert_bad_input(res, "no workload of that name", "'nope'")
    res = kb("gate", "@1", "HEAD", "--db", store_url, "--repo", shallow, "--name", "nope")
    assert_bad_input(res, "no workload of that name")
    assert store_state(store_url) == before


def test_shallow_clone_head_has_a_baseline(store_url, world, shallow):
    """In the shallow clone HEAD is the world's HEAD, which has a baseline: diff works."""
    res = kb("diff", "@1", "HEAD", "--db", store_url, "--repo", shallow, "--name", "w", "--format", "json")
    assert res.rc == 0, res
    assert json.loads(res.stdout)["after"]["commit"] == world.head()


def test_detached_head_snapshot_works(store_url, world, tmp_path):
    """Detached HEAD is not an error: the baseline says detached=True, branch ""."""

    clone = tmp_path / "detached"
    git(tmp_path, "clone", "-q", str(world.repo), str(clone))
    git(clone, "checkout", "-q", "--detach", "HEAD~1")
    n = baseline_count(store_url)
    res = kb("snapshot", world.tiny, "--db", store_url, "--repo", clone, "--name", "detached-w",
             "--format", "json", "--limit", "1")
    assert res.rc == 0, res
    assert "(detached)" in res.stderr
    doc = json.loads(res.stdout)
    assert doc["created"] and doc["commit"] == world.head("HEAD~1")
    lst = kb("list", "--db", store_url, "--name", "detached-w", "--format", "json")
    assert lst.rc == 0, lst
    [b] = json.loads(lst.stdout)["baselines"]
    assert b["detached"] is True and b["branch"] == "" and b["commit"] == world.head("HEAD~1")
    assert baseline_count(store_url) == n + 1
    with store_open(store_url) as st:
        queries.delete_baseline(st, b["id"])  # the module's store keeps its two baselines
    gc.collect()  # the commands' pooled connections: closed, the WAL checkpointed


@pytest.mark.slow
def test_baseline_id_that_does_not_exist(store_url, world):
    before = store_state(store_url)
    db = ("--db", store_url, "--repo", world.repo)
    assert_bad_input(kb("show", "@999", *db), "@999", "no such baseline")
    assert_bad_input(kb("diff", "@999", "@1", *db), "@999", "no such baseline")
    assert_bad_input(kb("gate", "@1", "@999", *db), "@999", "no such baseline")
    assert_bad_input(kb("rm", "@999", "--yes", *db), "@999", "no such baseline")
    assert store_state(store_url) == before


@pytest.mark.slow
def test_workload_with_no_baselines(store_url, world):
    before = store_state(store_url)
    # a workload the store has never held (it holds others): said as such, with the stored names (issue 38)
    res = kb("gate", "--name", "nope", "--db", store_url, "--repo", world.repo)
    assert_bad_input(res, "no workload of that name", "'nope'", "it holds")
    res = kb("show", "HEAD", "--name", "nope", "--db", store_url, "--repo", world.repo)
    assert_bad_input(res, "no workload of that name", "'nope'")
    assert store_state(store_url) == before


# --------------------------------------------------------------------------- configuration and usage


@pytest.mark.slow
@pytest.mark.parametrize("toml, mention", [
    ("[tool.kbase\nname = 'x'\n", "malformed TOML"),
    ("[tool.kbase]\nwarmup = 'two'\n", "warmup must be a int"),
    ("[tool.kbase]\nname = 3\n", "name must be a str"),
    ("[tool.kbase]\ntrim = [1]\n", "trim"),
    ("[tool.kbase]\nno_such_key = 1\n", "unknown key 'no_such_key'"),
], ids=["bad-toml", "warmup-type", "name-type", "trim-shape", "unknown-key"])
def test_malformed_tool_kbase(store_url, world, tmp_path, toml, mention):
    repo = make_repo(tmp_path / "cfg", commits=2)
    (repo / "pyproject.toml").write_text(toml)
    before = store_state(store_url)
    for args in (("snapshot", world.tiny, "--force"), ("gate", "@1", "@2"), ("diff", "@1", "@2")):
        res = kb(*args, "--db", store_url, "--repo", repo)
        assert_bad_input(res, str(repo / "pyproject.toml"), mention)
    assert store_state(store_url) == before


@pytest.mark.slow
def test_unknown_format_everywhere(store_url, world):
    before = store_state(store_url)
    db = ("--db", store_url, "--repo", world.repo, "--name", "w")
    for args in (("snapshot", world.tiny, "--force"), ("show", "@1"), ("list",), ("diff", "@1", "@2"),
                 ("gate", "@1", "@2"), ("history", "x")):
        res = kb(*args, *db, "--format", "xml")
        assert_bad_input(res, "xml")
    assert store_state(store_url) == before


# --------------------------------------------------------------------------- the store itself (SQLite)


@contextlib.contextmanager
def read_only(path: Path):
    """Make the database file and its folder unwritable for the duration. As root, file modes do
    not stop writes: use ``chattr +i`` (immutable) instead, or skip."""
    folder = path.parent
    if os.geteuid() == 0:
        chattr = shutil.which("chattr")
        if chattr is None:
            pytest.skip("running as root: file permissions do not apply (and no chattr for +i)")
        done = []
        try:
            for p in (path, folder):
                out = subprocess.run([chattr, "+i", str(p)], capture_output=True, text=True)
                if out.returncode != 0:
                    pytest.skip(f"running as root: file permissions do not apply and chattr +i failed "
                                f"({out.stderr.strip()})")
                done.append(p)
            try:
                (folder / "probe").write_text("x")
            except OSError:
                pass
            else:
                (folder / "probe").unlink()
                pytest.skip("running as root: file permissions do not apply (chattr +i had no effect)")
            yield
        finally:
            for p in reversed(done):
                subprocess.run([chattr, "-i", str(p)], capture_output=True)
        return
    mode_f, mode_d = path.stat().st_mode, folder.stat().st_mode
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        yield
    finally:
        folder.chmod(mode_d & 0o7777)
        path.chmod(mode_f & 0o7777)


@pytest.fixture
def private_store(world, tmp_path) -> str:
    """A SQLite store of this test only (its file is made read-only, corrupted, locked...)."""
    return _seed_store(world, f"sqlite:///{tmp_path / 'st' / 'kbase.db'}")


@pytest.mark.slow
def test_read_only_database(private_store, world):
    path = Path(private_store[len("sqlite:///"):])
    before = store_state(private_store)
    listing = sorted(p.name for p in path.parent.iterdir())
    with read_only(path):
        res = kb("snapshot", world.tiny, "--db", private_store, "--repo", world.repo, "--force")
        assert_bad_input(res, str(path), "read-only")
        res = kb("rm", "@1", "--yes", "--db", private_store)
        assert_bad_input(res, "read-only")
        # reading a read-only store: works, or says read-only in one line
        res = kb("list", "--db", private_store, "--format", "json")
        if res.rc != 0:
            assert_bad_input(res, "read-only")
        assert store_state(private_store) == before
        assert sorted(p.name for p in path.parent.iterdir()) == listing
    assert store_state(private_store) == before


@pytest.mark.slow
def test_database_locked_past_the_timeout(private_store, world, monkeypatch):
    import kbase.store.engine

    path = Path(private_store[len("sqlite:///"):])
    before = store_state(private_store)
    holder = sqlite3.connect(path, isolation_level=None, timeout=0)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        t0 = time.monotonic()
        res = kb_proc("snapshot", world.tiny, "--db", private_store, "--repo", world.repo, "--force",
                      env={"KBASE_BUSY_TIMEOUT": "1"})
        assert_bad_input(res, str(path), "locked")
        assert time.monotonic() - t0 < 120
        # the same in this process (the timeout is read at import: patch it)
        monkeypatch.setattr(kbase.store.engine, "BUSY_TIMEOUT_S", 1.0)
        res = kb("rm", "@1", "--yes", "--db", private_store)
        assert_bad_input(res, "locked")
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert store_state(private_store) == before
    assert baseline_count(private_store) == 2


@pytest.fixture
def private_any_store(request, world, tmp_path) -> str:
    """A seeded store of this test only, on SQLite or PostgreSQL."""
    if request.param == "sqlite":
        return _seed_store(world, f"sqlite:///{tmp_path / 'st' / 'kbase.db'}")
    return _seed_store(world, request.getfixturevalue("pg_db_url"))


@pytest.mark.slow
@pytest.mark.parametrize("private_any_store", ["sqlite", "postgresql"], indirect=True)
def test_store_from_a_newer_kbase(private_any_store, world):
    """Stamped with Alembic revision 9999: every command refuses it in one line and changes nothing
    (``tests/store/baselines`` covers snapshot/list/show/db upgrade; here also diff, gate, rm, history
    and the byte/row-level check of the whole store)."""
    from sqlalchemy import create_engine, text

    url = private_any_store
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    before = store_state(url)
    db = ("--db", url, "--repo", world.repo, "--name", "w")
    for args in (("snapshot", world.tiny, "--force"), ("list",), ("show", "@1"), ("diff", "@1", "@2"),
                 ("gate", "HEAD~1", "HEAD"), ("rm", "@1", "--yes"), ("history", "x"), ("db", "upgrade")):
        res = kb(*args, *db) if args[0] not in ("list", "rm", "history", "db") else kb(*args, "--db", url)
        assert_bad_input(res, "schema revision 9999", "newer kbase")
    assert store_state(url) == before


@pytest.mark.parametrize("garbage", ["random", "sqlite-header"])
def test_corrupt_database_file(tmp_path, world, garbage):
    path = tmp_path / "st" / "kbase.db"
    path.parent.mkdir()
    data = random.Random(7).randbytes(20_000)
    if garbage == "sqlite-header":
        data = b"SQLite format 3\x00" + data
    path.write_bytes(data)
    url = f"sqlite:///{path}"
    for args in (("snapshot", world.tiny, "--repo", world.repo), ("list",), ("show", "@1"),
                 ("diff", "@1", "@2"), ("db", "upgrade")):
        res = kb(*args, "--db", url)
        assert_bad_input(res, str(path), "corrupt")
    assert path.read_bytes() == data
    assert sorted(p.name for p in path.parent.iterdir()) == ["kbase.db"]


def test_store_path_is_a_directory(tmp_path, world):
    d = tmp_path / "iam.db"
    d.mkdir()
    res = kb("snapshot", world.tiny, "--db", d, "--repo", world.repo)
    assert_bad_input(res, str(d), "directory")
    assert list(d.iterdir()) == []


@pytest.mark.slow
def test_postgresql_url_that_cannot_connect(world, monkeypatch):
    url = "postgresql+psycopg://kb:s3cret@127.0.0.1:1/x"
    res = kb_proc("snapshot", world.tiny, "--repo", world.repo, "--db", url, timeout=120)
    assert_bad_input(res, "postgresql+psycopg://kb:***@127.0.0.1:1/x", "cannot connect")
    assert "s3cret" not in res.stderr and "s3cret" not in res.stdout
    # in this process: other commands, the plain postgresql:// spelling, and KBASE_DB
    for args in (("list", "--db", url), ("show", "@1", "--db", url), ("gate", "@1", "@2", "--db", url),
                 ("db", "upgrade", "--db", url), ("list", "--db", "postgresql://kb:s3cret@127.0.0.1:1/x")):
        res = kb(*args)
        assert_bad_input(res, "kb:***@127.0.0.1:1/x", "cannot connect")
        assert "s3cret" not in res.stderr and "s3cret" not in res.stdout
    monkeypatch.setenv("KBASE_DB", url)
    res = kb("list")
    assert_bad_input(res, "kb:***@127.0.0.1:1/x")
    assert "s3cret" not in res.stderr


def test_mask_url_never_shows_a_password():
    from kbase.store.engine import mask_url

    assert mask_url("postgresql+psycopg://kb:s3cret@h:5432/db") == "postgresql+psycopg://kb:***@h:5432/db"
    assert "s3cret" not in mask_url("postgresql+psycopg://kb:s3cret@[::1]:5432/db")
    assert mask_url("sqlite:////tmp/x.db") == "sqlite:////tmp/x.db"
