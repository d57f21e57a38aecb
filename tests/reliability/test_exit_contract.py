"""Issue 12, the exit-code contract everywhere: every option of every command and every environment
variable kbase reads, given a hostile or malformed value, ends in exit 0/1/2 — never 3 — and an error is
exactly one line on stderr with no terminal escape and no password in it; output paths that cannot be
written are refused before the gate prints a verdict; git refusals and folders named like revisions get
the right message; and a gate or diff whose sides resolve to the same baseline is exit 2 whatever the flags.
The table is built from the command line itself (Typer's parameters), so a new option joins it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import typing
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import kb

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

REV1, REV2, REV3 = "1" * 40, "2" * 40, "3" * 40
HOSTILE = ["x[/bold]", "\x1b[2J\x1b]0;pwn\x07", "bad\udcffbyte\nline2\r", "\u202eevil", ""]
ODD_REVS = ["HEAD~999", "@{-1}", ":/no such message", "a..b", "-", "@", "@x", "@-1", "HEAD^{tree}", "0" * 40,
            "main~", "refs/heads/../../x",
            # issue 29: git's whole revision syntax, over-long revisions, ids past 64 bits, bytes not UTF-8
            "HEAD@{1.day.ago}", "main@{yesterday}", "@{1}", "@{upstream}", "@~1", "--output=x", "x" * 5000,
            "r" * 200_000, "@" + "9" * 20, "@" + "9" * 5000, "@²", "HEAD\udcff", "\udcff" * 3]
BASE = {
    "top": ["{P}"], "snapshot": ["{P}", "--no-git", "--rev", REV3, "--db", "{W}"],
    "diff": ["@1", "@2", "--db", "{S}"], "gate": ["@1", "@2", "--db", "{S}"],
    "accept": ["k*", "--rev", "HEAD", "--reason", "r", "--db", "{W}"], "list": ["--db", "{S}"],
    "show": ["@1", "--db", "{S}"], "rm": ["@999", "--yes", "--db", "{W}"], "history": ["k", "--db", "{S}"],
    "db upgrade": ["--db", "{W}"], "db current": ["--db", "{S}"],
    "export": ["{D}/exported", "--db", "{S}"], "import": ["{D}", "--db", "{W}"],
    "prune": ["--keep-branch", "main", "--db", "{W}"],
}
READ_ONLY = {"top", "diff", "gate", "list", "show", "history", "db current", "export"}


def _commands() -> dict[str, typing.Any]:
    from typer.main import get_command

    import kbase.cli as cli

    out: dict[str, typing.Any] = {}

    def walk(group, prefix: str = "") -> None:
        for name, cmd in group.commands.items():
            full = f"{prefix}{name}"
            if hasattr(cmd, "commands"):
                walk(cmd, full + " ")
            elif full in BASE:
                out[full] = cmd

    walk(get_command(cli.app))
    return out


def _kind(param) -> str:
    """What a parameter takes (tuple, int, float, path or text), from its click type."""
    if param.nargs > 1:
        return "tuple"
    return {"int": "int", "integer": "int", "float": "float", "path": "path"}.get(getattr(param.type, "name", ""), "text")


def _bad_values(param) -> list[typing.Any]:
    kind = _kind(param)
    if kind == "tuple":
        return [("nan", "1"), ("2", "1"), ("x", "y"), ("-inf", "inf")]
    if kind == "int":
        return ["x", "-3", "9" * 30]
    if kind == "float":
        return ["x", "nan", "-1", "1e999"]
    if kind == "path":  # (issue 29: links to a file and to nothing, never written through)
        return ["/missing/dir/f", "{F}/sub", "{D}", HOSTILE[1], "{L}", "{DL}"]
    return HOSTILE + (ODD_REVS if param.name in ("a", "b", "ref", "rev", "base_ref", "history_ref") else [])


def _cases() -> list:
    cases = []
    for name, cmd in _commands().items():
        for p in cmd.params:
            if getattr(p, "is_flag", False) or p.name in ("help",):
                continue
            for v in _bad_values(p):
                shown = repr(v) if len(str(v)) < 60 else f"<{len(v)} chars {v[:12]!r}>"
                cases.append(pytest.param(name, p, v, id=f"{name}:{p.name}={shown}"[:90]))
    return cases


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("contract")
    p = generate_export(d / "p.sqlite", ExportSpec(n_gpus=1, iterations=5, seed=1)).path
    store = d / "store.db"
    for rev in (REV1, REV2):
        r = kb("snapshot", p, "--no-git", "--rev", rev, "--db", str(store), "--format", "json")
        assert r.rc == 0, r
    (d / "afile").write_text("x")
    (d / "adir").mkdir()
    (d / "alink").symlink_to(d / "afile")
    (d / "dangling").symlink_to(d / "nothing-here")
    return {"P": p, "S": store, "F": d / "afile", "D": d / "adir", "L": d / "alink", "DL": d / "dangling", "d": d}


def _fill(value: str, world: dict[str, Path], writable: Path) -> str:
    return (value.replace("{P}", str(world["P"])).replace("{S}", str(world["S"])).replace("{W}", str(writable))
            .replace("{F}", str(world["F"])).replace("{DL}", str(world["DL"])).replace("{D}", str(world["D"]))
            .replace("{L}", str(world["L"])))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_contract(r, *, secret: str | None = None) -> None:
    assert r.rc in (0, 1, 2), r
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r
    assert "\x1b" not in r.stderr and "\x1b" not in r.stdout, r
    if r.rc == 2:
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("kbase: error:"), r
    if secret:
        assert secret not in r.stderr and secret not in r.stdout, r


@pytest.mark.slow
@pytest.mark.parametrize(("command", "param", "value"), _cases())
def test_every_option_keeps_the_exit_code_contract(world, tmp_path, monkeypatch, command, param, value):
    monkeypatch.chdir(tmp_path)  # a relative --db value written by a writing command lands here, not in the checkout
    writable = tmp_path / "w.db"
    shutil.copy(world["S"], writable)
    base = [_fill(a, world, writable) for a in BASE[command]]
    values = [_fill(v, world, writable) for v in (value if isinstance(value, tuple) else (value,))]
    if param.opts and param.opts[0].startswith("-"):
        args = base + [param.opts[0], *values]
    else:  # a positional argument: replace the first of the base arguments that plays its part
        positional = [p.name for p in _commands()[command].params if not (p.opts and p.opts[0].startswith("-"))]
        index = positional.index(param.name)
        args = list(base)
        args[index] = values[0]
    before = _digest(world["S"])
    r = kb(*command.split(), *args)
    assert_contract(r, secret="pw-secret")
    if command in READ_ONLY:
        assert _digest(world["S"]) == before, "a read-only command changed the store"


ENV_CASES = [
    ("KBASE_DB", "/missing\x1bdir/x.db", ["show", "@1"]),
    ("KBASE_DB", "{F}/sub/k.db", ["snapshot", "{P}", "--no-git", "--rev", REV3]),
    ("KBASE_DB", "{D}", ["list"]),
    ("KBASE_DB", "postgresql://u:pw-secret@127.0.0.1:1/x?password=pw-secret", ["list"]),
    ("KBASE_DB", "host=127.0.0.1 password=pw-secret", ["list"]),
    ("KBASE_DB", "mysql+nodriver://u:pw-secret@h/x", ["list"]),
    ("KBASE_BUSY_TIMEOUT", "x", ["list", "--db", "{S}"]),
    ("KBASE_BUSY_TIMEOUT", "-1", ["list", "--db", "{S}"]),
    ("KBASE_BUSY_TIMEOUT", "nan", ["list", "--db", "{S}"]),
    ("KBASE_BUSY_TIMEOUT", "\x1b[2J", ["list", "--db", "{S}"]),
    ("KBASE_NSYS_TIMEOUT", "0", ["top", "{P}"]),
    ("KBASE_NSYS_TIMEOUT", "inf", ["top", "{P}"]),
    ("KBASE_NSYS_TIMEOUT", "x", ["top", "{P}"]),
    ("GITHUB_STEP_SUMMARY", "/missing/dir/s.md", ["gate", "@1", "@2", "--db", "{S}"]),
    ("GITHUB_STEP_SUMMARY", "{D}", ["gate", "@1", "@2", "--db", "{S}"]),
    ("GITHUB_STEP_SUMMARY", "{F}/s.md", ["gate", "@1", "@2", "--db", "{S}"]),
    ("GITHUB_STEP_SUMMARY", "{L}", ["gate", "@1", "@2", "--db", "{S}"]),
    ("GITHUB_STEP_SUMMARY", "{DL}", ["gate", "@1", "@2", "--db", "{S}"]),
]


@pytest.mark.parametrize(("var", "value", "args"), ENV_CASES, ids=[f"{v}={x!r}"[:60] for v, x, _ in ENV_CASES])
def test_every_environment_variable_keeps_the_contract(world, tmp_path, monkeypatch, var, value, args):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(var, _fill(value, world, tmp_path / "w.db").replace("\udcff", ""))
    before = _digest(world["S"])
    r = kb(*[_fill(a, world, tmp_path / "w.db") for a in args])
    assert_contract(r, secret="pw-secret")
    assert r.rc == 2, r
    assert r.stdout == "", "an error after output was printed"
    assert var in r.stderr or "store" in r.stderr, r
    assert _digest(world["S"]) == before


@pytest.mark.parametrize("flag", ["--junit", "--output", "--comment-md"])
@pytest.mark.parametrize("where", ["/missing/dir/out", "{D}", "{F}/out", "{L}", "{DL}"])
def test_unwritable_output_refused_before_the_verdict(world, flag, where):
    before = world["F"].read_text()
    r = kb("gate", "@1", "@2", "--db", str(world["S"]), flag, _fill(where, world, world["S"]))
    assert r.rc == 2 and r.stdout == "" and "PASS" not in r.stderr, r
    assert flag in r.stderr, r
    assert_contract(r)
    assert world["F"].read_text() == before and not (world["d"] / "nothing-here").exists()


# ------------------------------------------------------------------------------------------ git


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    for i in range(3):
        (r / "f.txt").write_text(str(i))
        git(r, "add", "f.txt")
        git(r, "commit", "-q", "-m", f"c{i}")
    return r


@pytest.mark.parametrize("flags", [(), ("--warn-only",), ("--allow-incomparable",), ("--strict",)])
def test_both_sides_on_one_baseline_is_exit_2_whatever_the_flags(world, repo, tmp_path, flags):
    """HEAD~2 has a baseline, HEAD~1 and HEAD none: both fall back to HEAD~2's."""
    db = tmp_path / "k.db"
    r = kb("snapshot", world["P"], "--repo", repo, "--rev", "HEAD~2", "--db", db)
    assert r.rc == 0, r
    before = _digest(db)
    for command in ("gate", "diff"):
        extra = flags if command == "gate" else tuple(f for f in flags if f == "--strict")
        r = kb(command, "HEAD~1", "HEAD", "--repo", repo, "--db", db, *extra)
        assert r.rc == 2 and r.stdout == "", r
        assert_contract(r)
        if "--strict" not in flags:
            assert "resolve to the same baseline @1" in r.stderr, r
    assert _digest(db) == before


def test_a_folder_named_like_a_branch_does_not_shadow_it(world, repo, tmp_path, monkeypatch):
    db = tmp_path / "k.db"
    for rev in ("HEAD~1", "HEAD"):
        assert kb("snapshot", world["P"], "--repo", repo, "--rev", rev, "--db", db).rc == 0
    monkeypatch.chdir(tmp_path)
    (tmp_path / "main").mkdir()
    r = kb("gate", "main~1", "main", "--repo", repo, "--db", db, "--format", "json")
    assert r.rc == 0, r  # the revision, not the folder
    r = kb("gate", "main~1", "./main", "--repo", repo, "--db", db)
    assert r.rc == 2 and "main" in r.stderr, r  # written as a path: the (empty) folder, refused
    assert_contract(r)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give the repo away")
def test_dubious_ownership_is_named(world, repo, tmp_path):
    os.chown(repo, 65534, 65534)
    for dirpath, dirnames, filenames in os.walk(repo):
        for n in dirnames + filenames:
            os.chown(os.path.join(dirpath, n), 65534, 65534, follow_symlinks=False)
    db = tmp_path / "k.db"
    assert kb("snapshot", world["P"], "--no-git", "--rev", REV1, "--db", db).rc == 0
    for args in (("snapshot", world["P"], "--repo", repo), ("gate", "HEAD~1", "HEAD", "--repo", repo),
                 ("snapshot", world["P"], "--repo", repo, "--rev", "HEAD")):
        r = kb(*args, "--db", db)
        assert r.rc == 2 and "dubious ownership" in r.stderr and "no commits" not in r.stderr, r
        assert_contract(r)


# ------------------------------------------------------------------------------------------ issue 29: values

# Revisions in git's own syntax (resolved by git itself: kbase has no parser of its own), with what they name in
# the ``repo`` fixture (c0 <- c1 <- c2 = HEAD on main; HEAD's reflog holds c0, c1, c2).
GIT_SYNTAX = {"HEAD": 0, "HEAD~1": 1, "HEAD^": 1, "main~2": 2, "@": 0, "@~1": 1, "@^^": 2, "@{1}": 1, "@{2}": 2,
              "HEAD@{1}": 1, "main@{1}": 1, "HEAD@{1.day.ago}": 2, "main@{yesterday}": 2, "HEAD@{0}": 0,
              ":/c1": 1, "HEAD^{commit}": 0, "main^0": 0, "refs/heads/main": 0, "HEAD~1^{/c0}": 2}


@pytest.fixture
def stored_repo(world, repo, tmp_path) -> tuple[Path, Path, list[str]]:
    """``repo`` with a baseline at each of its three commits; (repo, store, [HEAD, HEAD~1, HEAD~2] hashes)."""
    db = tmp_path / "k.db"
    hashes = [git(repo, "rev-parse", f"HEAD~{i}") for i in range(3)]
    for h in hashes:
        assert kb("snapshot", world["P"], "--repo", repo, "--rev", h, "--db", db).rc == 0
    return repo, db, hashes


@pytest.mark.parametrize("rev", list(GIT_SYNTAX))
def test_every_git_revision_syntax_resolves_as_git_does(stored_repo, rev):
    repo, db, hashes = stored_repo
    r = kb("show", rev, "--repo", repo, "--db", db, "--format", "json")
    assert r.rc == 0, r
    import json

    assert json.loads(r.stdout)["baseline"]["commit"] == hashes[GIT_SYNTAX[rev]], rev
    short = git(repo, "rev-parse", "--short", "HEAD~1")
    assert kb("diff", short, rev if GIT_SYNTAX[rev] != 1 else "HEAD~2", "--repo", repo, "--db", db).rc == 0


# Revisions that name no commit, each with what the one line must say.
BAD_REVISIONS = {
    "HEAD~99": "unknown git revision", "@{-1}": "unknown git revision", "@{99}": "unknown git revision",
    "HEAD^{tree}": "tree", ":/no such message": "unknown git revision", "--output=x": "unknown git revision",
    "-x": "unknown git revision", "x" * 5000: "at most 4,096", "y" * 200_000: "at most 4,096",
    "@" + "9" * 20: "ids go up to", "@" + "9" * 4400: "ids go up to", "@²": "baseline id looks like @12",
    "HEAD\udcff": "unknown git revision", "\udcff\udcfe": "unknown git revision", "nul\x00byte": "NUL",
    "0" * 40: "unknown git revision", "refs/heads/../../x": "unknown git revision",
}


@pytest.mark.parametrize("rev", list(BAD_REVISIONS), ids=[repr(r)[:30] for r in BAD_REVISIONS])
@pytest.mark.parametrize("command", ["show", "diff", "gate", "snapshot", "history"])
def test_a_revision_that_names_no_commit_is_one_line_exit_2(world, stored_repo, command, rev):
    repo, db, _ = stored_repo
    before = _digest(db)
    opts = ["--repo", str(repo), "--db", str(db)]  # options first, then "--": a revision may start with '-'
    args = {"show": ["show", *opts, "--", rev], "diff": ["diff", *opts, "--", "HEAD", rev],
            "gate": ["gate", *opts, "--", rev, "HEAD"], "snapshot": ["snapshot", *opts, f"--rev={rev}", world["P"]],
            "history": ["gate", *opts, f"--history-ref={rev}", "HEAD~1", "HEAD"]}
    r = kb(*args[command])
    assert_contract(r)
    assert r.rc == 2, r
    if command == "snapshot" and rev.startswith("@"):  # --rev takes a revision only: '@12' is none
        assert "git revision" in r.stderr, r
    elif command != "history":
        assert BAD_REVISIONS[rev] in r.stderr, r
    assert _digest(db) == before


def _steps_renamed(doc: dict, number) -> dict:
    for ev in doc["traceEvents"]:
        if str(ev.get("name", "")).startswith("ProfilerStep#"):
            ev["name"] = f"ProfilerStep#{number(int(ev['name'].split('#')[1]))}"
    return doc


# Step numbers in marker ranges (of steps n = 1..5): up to 2^53 - 1 they are steps; past it (int64's end, 5,000
# digits) damage. (name of step n, whether it is read)
STEP_NAMES = {
    "plain": (str, True), "leading zeros": (lambda n: f"0000{n}", True),
    "up to 2^53-1": (lambda n: str(2**53 - 6 + n), True), "just past 2^53-1": (lambda n: str(2**53 - 5 + n), False),
    "int64 max": (lambda n: str(2**63 - 6 + n), False), "past int64": (lambda n: str(2**63 + n), False),
    "past uint64": (lambda n: str(2**64 + n), False), "30 digits": (lambda n: f"{'1' * 29}{n}", False),
    "5000 digits": (lambda n: f"{'7' * 5000}{n}", False),
}


@pytest.mark.parametrize("case", list(STEP_NAMES))
@pytest.mark.parametrize("fmt", ["kineto", "nsys"])
def test_step_numbers_past_the_limit_are_exit_2(world, tmp_path, fmt, case):
    import sqlite3
    import sys

    number, ok = STEP_NAMES[case]
    if fmt == "kineto":
        sys.path.insert(0, str(Path(__file__).parents[1] / "readers"))
        from helpers.kineto_traces import trace_doc, write_trace

        path = write_trace(tmp_path / "t.json", _steps_renamed(trace_doc(rank=0, world=None, steps=5), number))
    else:
        path = tmp_path / "p.sqlite"
        shutil.copy(world["P"], path)
        with sqlite3.connect(path) as conn:
            steps = conn.execute("SELECT rowid, text FROM NVTX_EVENTS WHERE text LIKE 'ProfilerStep#%'").fetchall()
            for rowid, text in steps:
                conn.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = ?",
                             (f"ProfilerStep#{number(int(text.split('#')[1]))}", rowid))
    before = _digest(path)
    for args in (("top", path), ("snapshot", path, "--no-git", "--rev", REV3, "--db", tmp_path / "k.db")):
        r = kb(*args)
        assert_contract(r)
        if ok:
            assert r.rc == 0, r
        else:
            assert r.rc == 2 and "not a training step number" in r.stderr and str(path) in r.stderr, r
            assert not (tmp_path / "k.db").exists()
    assert _digest(path) == before
