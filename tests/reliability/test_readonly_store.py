"""Issue 29, class 6: a store on read-only media (a read-only bind mount here, as a mounted CI cache or a
read-only volume) is read by every read command — ``list``, ``show``, ``history``, ``diff``/``gate`` of stored
baselines, ``db current``, ``steps``, ``accept --list``, ``report`` (written elsewhere), ``top FILE`` answered
from the store — on both read paths (``sqlite3``, SQLAlchemy), whatever side files lie beside it: none (closed
cleanly), committed frames in a ``-wal`` without its ``-shm`` (they are read), ``-wal`` and ``-shm``, or a
rollback-mode store. A writing command, and a store at an older schema that would need an upgrade, is one clear
line (exit 2).

The mount needs a private mount namespace: ``unshare -rm`` (a user namespace; no privileges needed where the
kernel allows them). Where it cannot be made, the tests skip saying so."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import kb
from helpers.shared import REPO

REV1, REV2 = "1" * 40, "2" * 40
MOUNT = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'


def _can_mount_read_only(tmp: Path) -> str | None:
    """None when a read-only bind mount can be made here, else why not."""
    if not shutil.which("unshare"):
        return "no unshare(1) to make a private mount namespace"
    d = tmp / "probe"
    d.mkdir(exist_ok=True)
    r = subprocess.run(["unshare", "-rm", "sh", "-c", MOUNT + " ; ", "sh", str(d), "sh", "-c",
                        f"touch {d}/x 2>/dev/null && echo writable || echo read-only"],
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0 or "read-only" not in r.stdout:
        return f"cannot make a read-only bind mount here (unshare -rm: {r.stderr.strip()[:120] or r.stdout.strip()})"
    return None


# Runs several kbase commands in one child process (one interpreter start), each as the command line would,
# and prints their (exit code, stdout, stderr) as JSON.
MANY = """
import contextlib, io, json, sys
from kbase import cli
out = []
for argv in json.loads(sys.argv[1]):
    o, e = io.StringIO(), io.StringIO()
    sys.argv = ["kbase", *argv]
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            cli.main()
            rc = 0
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out.append([rc, o.getvalue(), e.getvalue()])
sys.__stdout__.write(json.dumps(out))
"""


class Ran:
    def __init__(self, rc: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = rc, stdout, stderr


def run_many_on_read_only(folder: Path, commands: list[tuple], env: dict | None = None) -> list[Ran]:
    """Each of ``commands`` (kbase's arguments) in one child process that sees ``folder`` mounted read-only."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", **(env or {})}
    full_env.pop("KBASE_DEBUG", None)
    argvs = json.dumps([[str(a) for a in c] for c in commands])
    p = subprocess.run(["unshare", "-rm", "sh", "-c", MOUNT, "sh", str(folder), sys.executable, "-c", MANY, argvs],
                       capture_output=True, text=True, timeout=600, env=full_env, cwd=folder.parent)
    assert p.returncode == 0, p.stderr
    return [Ran(*r) for r in json.loads(p.stdout)]


def run_on_read_only(folder: Path, *args, env: dict | None = None) -> Ran:
    """``kbase ARGS`` in a child process that sees ``folder`` mounted read-only."""
    return run_many_on_read_only(folder, [args], env)[0]


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("ro")
    why = _can_mount_read_only(d)
    if why:
        pytest.skip(why)
    repo = d / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "one"], check=True)
    p = generate_export(d / "p.sqlite", ExportSpec(n_gpus=1, iterations=5, seed=1)).path
    store = d / "made" / "kbase.db"
    for rev in (REV1, REV2):
        assert kb("snapshot", p, "--no-git", "--rev", rev, "--db", store).rc == 0
    assert kb("snapshot", p, "--repo", repo, "--db", store).rc == 0  # @3 at HEAD: top answers from it
    return {"d": d, "P": p, "store": store, "repo": repo}


def _layout(world: dict, tmp: Path, kind: str) -> tuple[Path, str | None]:
    """A folder holding the store as ``kind`` says; (folder, the note a committed-in-WAL-only edit wrote)."""
    folder = tmp / "media"
    folder.mkdir()
    db = folder / "kbase.db"
    shutil.copyfile(world["store"], db)
    note = None
    if kind == "rollback":
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA journal_mode=DELETE").fetchall()
        conn.close()
    elif kind in ("wal without shm", "wal and shm"):
        work = tmp / "writer.db"
        shutil.copyfile(world["store"], work)
        conn = sqlite3.connect(work, isolation_level=None)
        conn.execute("PRAGMA wal_autocheckpoint=0")
        note = "committed in the -wal only"
        conn.execute("UPDATE baseline SET note = ? WHERE id = 1", (note,))
        shutil.copyfile(work, db)  # (while the writer holds it: the edit is in its -wal alone)
        shutil.copyfile(str(work) + "-wal", str(db) + "-wal")
        if kind == "wal and shm":
            shutil.copyfile(str(work) + "-shm", str(db) + "-shm")
        conn.close()
    else:
        assert kind == "closed cleanly"
    return folder, note


READS = [("list", "--format", "json"), ("show", "@1", "--format", "json"), ("history", "flash_fwd_kernel"),
         ("db", "current"), ("diff", "@1", "@2"), ("gate", "@1", "@2"), ("steps",), ("accept", "--list")]
KINDS = ["closed cleanly", "wal without shm", "wal and shm", "rollback"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_read_command_reads_a_store_on_read_only_media(world, tmp_path, kind):
    folder, note = _layout(world, tmp_path, kind)
    before = sorted(p.name for p in folder.iterdir())
    out = tmp_path / "report"
    ran = run_many_on_read_only(folder, [(*args, "--db", folder / "kbase.db") for args in READS]
                                + [("report", "--db", folder / "kbase.db", "--out", out, "-q")])
    for args, r in zip(READS, ran):
        assert r.returncode in (0, 1), (args, r.stderr)
        assert "Traceback" not in r.stderr
        if args[0] == "list":
            rows = json.loads(r.stdout)
            rows = rows if isinstance(rows, list) else rows.get("baselines", rows)
            assert len(rows) == 3
            if note:
                assert note in r.stdout, "committed frames of the -wal were not read"
    assert ran[-1].returncode == 0 and (out / "index.html").is_file(), ran[-1].stderr
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing beside the store, nothing left


@pytest.mark.parametrize("kind", KINDS)
def test_top_answers_from_a_store_on_read_only_media(world, tmp_path, kind):
    folder, _ = _layout(world, tmp_path, kind)
    r = run_on_read_only(folder, "top", world["P"], "--repo", world["repo"], "--db", folder / "kbase.db", "-f",
                         "json")
    assert r.returncode == 0, r.stderr
    assert any("from the store" in n for n in json.loads(r.stdout)["notes"])


def test_writing_to_a_store_on_read_only_media_is_one_line(world, tmp_path):
    folder, _ = _layout(world, tmp_path, "closed cleanly")
    writes = [("snapshot", world["P"], "--no-git", "--rev", "3" * 40), ("rm", "1", "--yes"), ("db", "upgrade")]
    for args, r in zip(writes, run_many_on_read_only(folder, [(*w, "--db", folder / "kbase.db") for w in writes])):
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "read-only" in lines[0], (args, r.stderr)


def test_an_older_store_on_read_only_media_says_it_needs_an_upgrade(world, tmp_path):
    from alembic import command

    from kbase.store.engine import alembic_config

    folder, _ = _layout(world, tmp_path, "closed cleanly")
    url = f"sqlite:///{folder / 'kbase.db'}"
    command.downgrade(alembic_config(url), "0007")
    for r in run_many_on_read_only(folder, [("list", "--db", folder / "kbase.db"),
                                            ("show", "@1", "--db", folder / "kbase.db")]):
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1, r.stderr
        assert "revision 0007" in lines[0] and "cannot be upgraded here" in lines[0], lines
