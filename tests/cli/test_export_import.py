"""``kbase export DIR`` / ``kbase import DIR``: one file per baseline, tombstone and acceptance, named by the hash of
its bytes; the round trip diffs identically; import is idempotent, all or nothing, refuses one capture key with
two contents naming both, applies tombstones (``prune --export``), carries acceptances; every bad file is exit 2
naming it, with the store byte-identical.

The world: a generated history of 4 commits on ``main`` with a GEMM 30% slower at the last one, accepted, plus a
pull-request branch's baseline."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.store_state import store_state

pytestmark = pytest.mark.slow

GEMM = "nvjet_hsh_256x128"


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    from kbase.synth.history import HistorySpec, InjectedStep, _kernel, generate_history

    spec = HistorySpec(commits=4, steps=[InjectedStep(3, _kernel(GEMM), 1.3, "gemm: 256x128 tiles")], iterations=4)
    h = generate_history(tmp_path_factory.mktemp("xfer") / "h", spec)
    r = run_kbase("accept", f"{GEMM}*", "--rev", "HEAD", "--reason", "new tiles", "--db", h.db_url, "--repo", h.repo)
    assert r.rc == 0, r
    _git(h.repo, "checkout", "-q", "-b", "feature")
    (h.repo / "f.txt").write_text("x")
    _git(h.repo, "add", "f.txt")
    _git(h.repo, "-c", "user.name=t", "-c", "user.email=t@kbase.invalid", "commit", "-q", "-m", "feature")
    r = run_kbase("snapshot", h.root / "exports" / "c002.sqlite", "--db", h.db_url, "--repo", h.repo, "-q")
    assert r.rc == 0, r
    _git(h.repo, "checkout", "-q", "main")
    return h


@pytest.fixture
def world(history, tmp_path):
    db = tmp_path / "a.db"
    shutil.copyfile(history.db_url.removeprefix("sqlite:///"), db)
    return {"repo": history.repo, "a": db, "url": f"sqlite:///{db}", "tmp": tmp_path}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def kb(world, *args, db: str | None = None):
    return run_kbase(*args, "--db", db or world["url"], "--repo", world["repo"])


def test_round_trip_diffs_identically_and_is_deterministic(world):
    out = world["tmp"] / "data"
    r = kb(world, "export", out)
    assert r.rc == 0 and "5 baseline(s) and 1 acceptance(s)" in r.stderr and "6 file(s) written" in r.stderr, r
    files = _files(out)
    assert sum(n.endswith(".baseline") for n in files) == 5 and sum(n.endswith(".acceptance") for n in files) == 1
    for name, data in files.items():  # content-addressed
        assert hashlib.sha256(data).hexdigest()[:40] == name.split(".")[0]
    b = f"sqlite:///{world['tmp'] / 'b.db'}"
    r = kb(world, "import", out, db=b)
    assert r.rc == 0 and "5 new baseline(s), 0 already stored" in r.stderr and "1 new acceptance(s)" in r.stderr, r
    for args in (("diff", "HEAD~1", "HEAD", "--format", "json"), ("gate", "HEAD~1", "HEAD", "--format", "json"),
                 ("show", "HEAD", "--format", "json"), ("history", GEMM, "--format", "json")):
        one, two = kb(world, *args, "--name", "train"), kb(world, *args, "--name", "train", db=b)
        assert one.rc == two.rc and one.rc in (0, 1), (one, two)
        doc_a, doc_b = json.loads(one.stdout), json.loads(two.stdout)
        for doc in (doc_a, doc_b):  # store-local ids differ; everything measured is the same
            _drop_ids(doc)
        assert doc_a == doc_b, args
    gate = kb(world, "gate", "HEAD~1", "HEAD", "--name", "train", db=b)
    assert gate.rc == 0 and "accepted" in gate.stdout + gate.stderr, gate  # the acceptance travelled
    again = world["tmp"] / "again"
    assert kb(world, "export", again, db=b).rc == 0
    assert _files(again) == files  # the same store content, the same files, whichever store wrote them


def _drop_ids(doc):
    if isinstance(doc, dict):
        for k in list(doc):
            if k in ("id", "baseline_id", "created_at", "ref", "label", "generated_at") or k.endswith("_id"):
                doc.pop(k)
            else:
                _drop_ids(doc[k])
    elif isinstance(doc, list):
        for v in doc:
            _drop_ids(v)


def test_import_and_export_are_idempotent(world):
    out = world["tmp"] / "data"
    assert kb(world, "export", out).rc == 0
    before = _digest(world["a"])
    r = kb(world, "import", out)
    assert r.rc == 0 and "0 new baseline(s), 5 already stored" in r.stderr and "0 new acceptance(s)" in r.stderr, r
    assert _digest(world["a"]) == before
    files = _files(out)
    r = kb(world, "export", out)
    assert r.rc == 0 and "0 file(s) written, 6 already there" in r.stderr, r
    assert _files(out) == files


def _tamper(world, db: Path, sql: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql)


def test_one_key_two_contents_is_refused_naming_both(world):
    other = world["tmp"] / "b.db"
    shutil.copyfile(world["a"], other)
    head = _git(world["repo"], "rev-parse", "HEAD")
    _tamper(world, other, f"UPDATE baseline SET total_kernel_ns = total_kernel_ns + 1 WHERE \"commit\" = '{head}'")
    mine, theirs = world["tmp"] / "mine", world["tmp"] / "theirs"
    assert kb(world, "export", mine).rc == 0
    assert kb(world, "export", theirs, db=f"sqlite:///{other}").rc == 0
    new = sorted(set(_files(theirs)) - set(_files(mine)))
    assert len(new) == 1
    # a file against the store
    before = _digest(world["a"])
    r = kb(world, "import", theirs)
    assert r.rc == 2 and r.stderr.count("\n") == 1, r
    assert new[0] in r.stderr and "the store's @" in r.stderr and "different content" in r.stderr, r
    assert head[:12] in r.stderr and _digest(world["a"]) == before
    # two files in one folder
    shutil.copyfile(theirs / new[0], mine / new[0])
    fresh = world["tmp"] / "fresh.db"
    r = kb(world, "import", mine, db=f"sqlite:///{fresh}")
    assert r.rc == 2 and r.stderr.count(".baseline") == 2 and "different content" in r.stderr, r
    assert not fresh.exists() or "baseline" not in _tables_with_rows(fresh)
    # and export into a folder that holds the other content refuses before writing anything
    listing = _files(mine)
    r = kb(world, "export", theirs)
    assert r.rc == 2 and "different content" in r.stderr, r
    assert _files(mine) == listing


def _tables_with_rows(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n for n in names if conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0]}


def test_prune_tombstones_travel(world):
    out = world["tmp"] / "data"
    assert kb(world, "export", out).rc == 0
    c = f"sqlite:///{world['tmp'] / 'c.db'}"
    assert kb(world, "import", out, db=c).rc == 0
    stale = world["tmp"] / "stale.db"  # a runner's store from before the prune
    shutil.copyfile(world["a"], stale)
    r = kb(world, "prune", "--keep-branch", "main", "--yes", "--export", out)
    assert r.rc == 0 and "deleted 1 baseline(s)" in r.stdout and "1 tombstone(s) written" in r.stdout, r
    names = _files(out)
    assert sum(n.endswith(".deleted") for n in names) == 1 and sum(n.endswith(".baseline") for n in names) == 4
    r = kb(world, "import", out, db=c)  # a store that still holds the pruned baseline
    assert r.rc == 0 and "1 deleted by tombstones" in r.stderr, r
    listed = json.loads(kb(world, "list", "--format", "json", db=c).stdout)["baselines"]
    assert len(listed) == 4 and all(b["branch"] != "feature" for b in listed)
    # the stale runner exports the pruned baseline again: the tombstone leaves it out
    r = kb(world, "export", out, db=f"sqlite:///{stale}")
    assert r.rc == 0 and "1 deleted baseline(s) left out (tombstoned)" in r.stderr, r
    assert _files(out) == names
    fresh = f"sqlite:///{world['tmp'] / 'fresh.db'}"
    r = kb(world, "import", out, db=fresh)
    assert r.rc == 0 and "4 new baseline(s)" in r.stderr, r


def test_a_format_1_tombstone_deletes_by_its_key(world):
    """A tombstone written before kernel-table format 2 names a content digest no baseline carries now: its key
    alone names the baseline it deleted."""
    out = world["tmp"] / "data"
    assert kb(world, "export", out).rc == 0
    c = f"sqlite:///{world['tmp'] / 'c.db'}"
    assert kb(world, "import", out, db=c).rc == 0
    assert kb(world, "prune", "--keep-branch", "main", "--yes", "--export", out).rc == 0
    (tomb,) = [out / n for n in _files(out) if n.endswith(".deleted")]
    from kbase.store.transfer.export_files import file_name

    doc = json.loads(tomb.read_bytes())
    assert doc["format"] == "kbase.tombstone/2"
    doc.update(format="kbase.tombstone/1", content="f" * 64)  # a format-1 digest: matches no format-2 content
    data = (json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n").encode()
    tomb.unlink()
    (out / file_name(data, ".deleted")).write_bytes(data)
    r = kb(world, "import", out, db=c)
    assert r.rc == 0 and "1 deleted by tombstones" in r.stderr, r
    listed = json.loads(kb(world, "list", "--format", "json", db=c).stdout)["baselines"]
    assert len(listed) == 4 and all(b["branch"] != "feature" for b in listed)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
@pytest.mark.parametrize("damage", ["flip", "rename", "truncate", "link", "version", "junk-header", "not-a-dir"])
def test_a_bad_file_is_exit_2_naming_it_store_unchanged(world, damage, backend, request):
    out = world["tmp"] / "data"
    assert kb(world, "export", out).rc == 0
    name = next(n for n in sorted(_files(out)) if n.endswith(".baseline"))
    path = out / name
    data = path.read_bytes()
    target = path
    if damage == "flip":
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 1]) + data[-9:])
    elif damage == "rename":
        target = out / ("0" * 40 + ".baseline")
        path.rename(target)
    elif damage == "truncate":
        cut = data[: len(data) // 2]
        path.unlink()
        target = out / (hashlib.sha256(cut).hexdigest()[:40] + ".baseline")
        target.write_bytes(cut)
    elif damage == "link":
        path.unlink()
        os.symlink(world["a"], path)
    elif damage in ("version", "junk-header"):
        bad = data.replace(b"KBASE-BASELINE 2\n", b"KBASE-BASELINE 3\n", 1) if damage == "version" else \
            data.replace(b'"format":2', b'"format":"x"', 1)
        path.unlink()
        target = out / (hashlib.sha256(bad).hexdigest()[:40] + ".baseline")
        target.write_bytes(bad)
    # the store it is refused into: the world's, or the same rows on PostgreSQL
    url = world["url"] if backend == "sqlite" else request.getfixturevalue("pg_copy_of")(world["url"])
    before = store_state(url)
    folder = out if damage != "not-a-dir" else path
    r = kb(world, "import", folder, db=url)
    assert r.rc == 2 and r.stdout == "", r
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kbase: error:") and "Traceback" not in r.stderr, r
    assert str(target if damage != "not-a-dir" else path) in lines[0], r
    expected = {"flip": "does not match its name", "rename": "does not match its name", "truncate": "truncated",
                "link": "symbolic link", "version": "upgrade kbase", "junk-header": "format",
                "not-a-dir": "not a folder"}[damage]
    assert expected in lines[0], r
    assert store_state(url) == before


def test_export_never_writes_through_a_link(world, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    r = kb(world, "export", link)
    assert r.rc == 2 and "symbolic link" in r.stderr and not any(real.iterdir()), r
    out = tmp_path / "out"
    assert kb(world, "export", out).rc == 0
    victim = tmp_path / "victim"
    victim.write_text("keep")
    first = sorted(_files(out))[0]
    (out / first).unlink()
    (out / first).symlink_to(victim)  # an entry that is a link is replaced, never written through
    assert kb(world, "export", out).rc == 2 or victim.read_text() == "keep"
    assert victim.read_text() == "keep"


def test_python_api_round_trip(world):
    import kbase

    out = world["tmp"] / "py"
    settings = kbase.Settings.load(db=world["url"], repo=world["repo"])
    res = kbase.export_baselines(out, settings)
    assert res.written == 6 and "6 written" in repr(res)
    other = kbase.Settings.load(db=f"sqlite:///{world['tmp'] / 'py.db'}", repo=world["repo"])
    got = kbase.import_baselines(out, other)
    assert got.added == 5 and got.acceptances_added == 1 and len(got.added_ids) == 5
    assert kbase.import_baselines(out, other).already == 5


def test_postgresql_round_trip_writes_the_same_files(world, pg_db_url):
    """SQLite -> files -> PostgreSQL -> files: the same names and bytes; importing again adds nothing."""
    out, back = world["tmp"] / "data", world["tmp"] / "back"
    assert kb(world, "export", out).rc == 0
    r = kb(world, "import", out, db=pg_db_url)
    assert r.rc == 0 and "5 new baseline(s)" in r.stderr, r
    assert kb(world, "export", back, db=pg_db_url).rc == 0
    assert _files(back) == _files(out)
    r = kb(world, "import", out, db=pg_db_url)
    assert r.rc == 0 and "0 new baseline(s), 5 already stored" in r.stderr, r
    one = kb(world, "diff", "HEAD~1", "HEAD", "--format", "json", "--name", "train")
    two = kb(world, "diff", "HEAD~1", "HEAD", "--format", "json", "--name", "train", db=pg_db_url)
    doc_a, doc_b = json.loads(one.stdout), json.loads(two.stdout)
    _drop_ids(doc_a)
    _drop_ids(doc_b)
    assert doc_a == doc_b


def test_kernel_time_by_op_travels(world):
    """The ops blob goes with its baseline (its op ids as positions in op_names), and `diff --by op` of the
    imported store says what the exporting one says; an op key edited in a file (renamed to match) is refused."""
    out = world["tmp"] / "data"
    assert kb(world, "export", out).rc == 0
    headers = [json.loads(p.read_bytes().split(b"\n", 2)[1]) for p in sorted(out.glob("*.baseline"))]
    with_ops = [h for h in headers if h["blobs"].get("ops")]
    assert with_ops and all(h["op_names"] for h in with_ops), headers[0]["blobs"]
    b = f"sqlite:///{world['tmp'] / 'b.db'}"
    assert kb(world, "import", out, db=b).rc == 0
    one = kb(world, "diff", "HEAD~1", "HEAD", "--by", "op", "--format", "json", "--name", "train")
    two = kb(world, "diff", "HEAD~1", "HEAD", "--by", "op", "--format", "json", "--name", "train", db=b)
    assert one.rc == two.rc == 0, (one, two)
    doc_a, doc_b = json.loads(one.stdout), json.loads(two.stdout)
    _drop_ids(doc_a)
    _drop_ids(doc_b)
    assert doc_a == doc_b and doc_a.get("ops"), sorted(doc_a)
    path = next(p for p in sorted(out.glob("*.baseline"))
                if json.loads(p.read_bytes().split(b"\n", 2)[1]).get("op_names"))
    data = path.read_bytes()
    key = json.loads(data.split(b"\n", 2)[1])["op_names"][0][0]
    bad = data.replace(json.dumps(key).encode(), json.dumps(key + "_edited").encode(), 1)
    path.unlink()
    (out / (hashlib.sha256(bad).hexdigest()[:40] + ".baseline")).write_bytes(bad)
    before = _digest(world["a"])
    r = kb(world, "import", out)
    assert r.rc == 2 and "content digest" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r
    assert _digest(world["a"]) == before
