"""Issue #6, input safety.

- The profile is never written: its bytes (sha256), mtime and its folder's listing are the same after
  ``kbase top``, ``kbase snapshot`` and ``kbase diff`` — for a generated Nsight Systems export and,
  when ``../shared/data`` is present, a real export and a real PyTorch (Kineto) trace. Each is copied
  to a temporary folder first and made read-only (file 0444, folder 0555; as root, where modes do not
  stop writes, ``chattr +i`` as well when it works), so a write attempt fails loudly.
- No user value is ever formatted into SQL text: values go through bound parameters. A static check
  over ``kbase/*.py`` and ``migrations/`` asserts that every SQL string handed to ``execute``,
  ``executemany``, ``executescript``, ``exec_driver_sql`` or ``text`` is a literal, or an f-string
  that only interpolates names from a small allowed set (table and column names of ours) or an
  ``int(...)``. A behavioural check stores SQL-looking workload names, tags and notes verbatim.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.cli import run_kbase
from helpers.shared import KINETO_DIR, NSYS_DIR, REPO, shared_present

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

FULL_HASH = "fedcba9876543210fedcba9876543210fedcba98"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def folder_state(folder: Path) -> dict:
    """Every entry of ``folder`` with its size, mtime and sha256 (a journal or lock file shows up)."""
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns, _sha(p) if p.is_file() else None)
            for p in sorted(folder.iterdir())}


@contextlib.contextmanager
def protected(path: Path):
    """``path`` (a file) and its folder read-only: modes 0444/0555, plus ``chattr +i`` as root."""
    folder = path.parent
    modes = (path.stat().st_mode & 0o7777, folder.stat().st_mode & 0o7777)
    path.chmod(0o444)
    folder.chmod(0o555)
    immutable = []
    if os.geteuid() == 0 and shutil.which("chattr"):
        for p in (path, folder):
            if subprocess.run(["chattr", "+i", str(p)], capture_output=True).returncode == 0:
                immutable.append(p)
    try:
        yield
    finally:
        for p in reversed(immutable):
            subprocess.run(["chattr", "-i", str(p)], capture_output=True)
        folder.chmod(modes[1])
        path.chmod(modes[0])


def _sources() -> list:
    params = [pytest.param("generated", id="generated-nsys")]
    real = [("nsys", NSYS_DIR / "a100_saxpy_mpi.sqlite"),
            ("kineto", KINETO_DIR / "h100_qwen05b_chat.json.gz")]
    for kind, path in real:
        marks = ([] if shared_present() and path.is_file()
                 else [pytest.mark.skip(reason=f"{path} not present")])
        params.append(pytest.param(path, id=f"real-{kind}", marks=marks))
    return params


@pytest.mark.slow
@pytest.mark.parametrize("source", _sources())
def test_profile_is_never_written(source, tmp_path):
    folder = tmp_path / "profile"
    folder.mkdir()
    if source == "generated":
        profile = generate_export(folder / "gen.sqlite", ExportSpec(n_gpus=2, iterations=5)).path
    else:
        profile = folder / Path(source).name
        shutil.copyfile(source, profile)
    db = f"sqlite:///{tmp_path / 'store' / 'kbase.db'}"
    before = folder_state(folder)
    digest = _sha(profile)
    with protected(profile):
        for args in (
            ("top", profile, "--format", "json"),
            ("top", profile, "--format", "table"),
            ("snapshot", profile, "--db", db, "--no-git", "--rev", FULL_HASH, "--format", "json"),
            ("snapshot", profile, "--db", db, "--no-git", "--rev", FULL_HASH, "--force", "--format", "json"),
            ("diff", profile, profile, "--format", "json"),
            ("diff", "@1", profile, "--db", db, "--format", "json"),
            ("gate", "@1", "@2", "--db", db, "--format", "json"),
        ):
            res = run_kbase(*args)
            assert res.rc == 0, res
            assert folder_state(folder) == before, f"kbase {args[0]} changed the profile's folder"
    assert _sha(profile) == digest
    assert folder_state(folder) == before


# --------------------------------------------------------------------------- SQL built from values

SQL_SINKS = {"execute", "executemany", "executescript", "exec_driver_sql", "text"}
# Names an f-string in SQL may interpolate: table and column names (or SQL expressions built from
# them) chosen by kbase itself, never taken from a user or a profile.
ALLOWED_NAMES = {"table", "text", "text_id", "exprs"}
# kbase/generate.py writes its own synthetic export (never a user's value): it splices in its
# table names and integer process/device ids it computed itself.
ALLOWED_PER_FILE = {"generate.py": {"t", "dev", "ctx", "gpid", "gtid"}, "fixed_work.py": {"gpid", "gtid"},
                    # column expressions built from kbase's own constants and the export's column names
                    "nsys_activities.py": {"pid", "launch", "PID_SHIFT", "SYNC_TABLE", "skip"},
                    "transfer.py": {"IMPORT_LOCK"}}  # an int constant: the import's advisory lock key


def _safe_value(expr: ast.expr, allowed: set[str]) -> bool:
    """Is this interpolated expression one of ours: a name of the allowed set, a join of one, a
    run of ``?`` placeholders, an int?"""
    if isinstance(expr, ast.Name):
        return expr.id in allowed
    if isinstance(expr, ast.Constant):
        return True
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("int", "len"):
        return True
    if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "capped_sql"
            and all(isinstance(a, ast.Constant) for a in expr.args)):
        return True  # ``integrity.capped_sql('value')``: our own column, cut to the name cap
    if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "join"
            and isinstance(expr.func.value, ast.Constant) and len(expr.args) == 1):
        arg = expr.args[0]
        if (isinstance(arg, ast.BinOp) and isinstance(arg.op, ast.Mult) and isinstance(arg.left, ast.Constant)
                and arg.left.value == "?"):
            return True  # ",".join("?" * n): placeholders
        return _safe_value(arg, allowed)
    return False


def _sql_problems(expr: ast.expr, scope: ast.AST | None, depth: int = 0,
                  allowed: set[str] = frozenset(ALLOWED_NAMES)) -> list[str]:
    """Why the SQL text ``expr`` may carry a formatted value (empty list: it cannot)."""
    if isinstance(expr, ast.Constant):
        return []
    if isinstance(expr, ast.JoinedStr):
        return [f"f-string interpolates {ast.unparse(v.value)!r}" for v in expr.values
                if isinstance(v, ast.FormattedValue) and not _safe_value(v.value, allowed)]
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
        return [f"%-formatting: {ast.unparse(expr)[:80]}"]
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        out = []
        for side in (expr.left, expr.right):
            if isinstance(side, (ast.Constant, ast.JoinedStr, ast.BinOp)):
                out += _sql_problems(side, scope, depth, allowed)
            elif not _safe_value(side, allowed):
                out.append(f"concatenates {ast.unparse(side)[:60]!r}")
        return out
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "format":
        return [f".format(): {ast.unparse(expr)[:80]}"]
    if isinstance(expr, ast.Name) and scope is not None and depth < 3:
        # a variable: every value assigned to it in the enclosing function must be safe too
        out = []
        for node in ast.walk(scope):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == expr.id
                                                    for t in node.targets):
                out += _sql_problems(node.value, scope, depth + 1, allowed)
        return out
    return []  # SQLAlchemy constructs (select(), insert(), table.insert()...) bind their values


def _sql_calls(tree: ast.AST):
    """(call node, enclosing function) for every call of an SQL sink."""
    def visit(node, func):
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else func
            if isinstance(child, ast.Call):
                f = child.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
                if name in SQL_SINKS and child.args:
                    yield child, func
            yield from visit(child, inner)
    yield from visit(tree, None)


def _python_files() -> list[Path]:
    return sorted((REPO / "kbase").rglob("*.py"))  # every package, migrations included


@pytest.mark.slow
def test_no_user_value_is_formatted_into_sql():
    """Rule: SQL text is a literal; an f-string may only splice in our own table/column names
    (``ALLOWED_NAMES``) or an int. Every value goes through a bound parameter."""
    problems, seen = [], 0
    for path in _python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        allowed = ALLOWED_NAMES | ALLOWED_PER_FILE.get(path.name, set())
        for call, func in _sql_calls(tree):
            seen += 1
            for why in _sql_problems(call.args[0], func, allowed=allowed):
                problems.append(f"{path.relative_to(REPO)}:{call.lineno}: {why}")
    assert seen >= 10, "the scan found too few SQL calls: did the code move?"
    assert not problems, "SQL built from values (use bound parameters):\n" + "\n".join(problems)


def test_the_sql_check_catches_formatted_values():
    """The checker itself: it flags what it must and passes what it may."""
    bad = [
        'conn.execute(f"SELECT * FROM baseline WHERE workload = \'{name}\'")',
        'conn.execute("SELECT * FROM t WHERE x = %s" % value)',
        'conn.execute("SELECT * FROM t WHERE x = {}".format(value))',
        'conn.execute(text("SELECT " + col))',
        'def f(name):\n    sql = f"DELETE FROM baseline WHERE id = {name}"\n    conn.execute(sql)',
    ]
    good = [
        'conn.execute("SELECT 1")',
        'conn.execute(text("SELECT version_num FROM alembic_version"))',
        'cur.execute(f"SELECT max(rowid) FROM {table}")',
        'cur.execute(f"SELECT {\', \'.join(exprs)} FROM {table}")',
        'cur.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")',
        'conn.execute(select(t.c.id).where(t.c.name == name))',
        'conn.execute(text("SELECT * FROM t WHERE x = :x"), {"x": value})',
    ]
    for src in bad:
        tree = ast.parse(src)
        assert any(_sql_problems(c.args[0], f) for c, f in _sql_calls(tree)), src
    for src in good:
        tree = ast.parse(src)
        assert not any(_sql_problems(c.args[0], f) for c, f in _sql_calls(tree)), src


def test_sql_looking_values_are_stored_verbatim(store_url, tmp_path):
    """Workload names, tags and notes that look like SQL are data, stored and found as given."""
    export = generate_export(tmp_path / "e.sqlite", ExportSpec(n_gpus=1, iterations=4)).path
    evil = "w'); DROP TABLE baseline; --"
    tag = "t\" OR 1=1 --"
    note = "%s %(x)s {0} :param ? \\' \\\""
    r = run_kbase("snapshot", export, "--db", store_url, "--no-git", "--rev", FULL_HASH, "--name", evil,
                  "--tag", tag, "--note", note, "--format", "json", "--limit", "1")
    assert r.rc == 0, r
    r = run_kbase("list", "--db", store_url, "--name", evil, "--format", "json")
    assert r.rc == 0, r
    [b] = json.loads(r.stdout)["baselines"]
    assert b["workload"] == evil and b["tags"] == [tag] and b["note"] == note
    # a LIKE-ish commit prefix is a prefix, not a pattern
    r = run_kbase("list", "--db", store_url, "--commit", "%", "--format", "json")
    assert r.rc == 0 and json.loads(r.stdout)["baselines"] == [], r
    r = run_kbase("list", "--db", store_url, "--commit", FULL_HASH[:6], "--format", "json")
    assert [x["workload"] for x in json.loads(r.stdout)["baselines"]] == [evil]
    # the table is still there (shown, and gated against the profile it came from); a gate of the baseline
    # with itself is refused since issue 12 (exit 2: both sides are one baseline)
    r = run_kbase("show", f"@{b['id']}", "--db", store_url, "--name", evil, "--format", "json")
    assert r.rc == 0, r
    r = run_kbase("gate", f"@{b['id']}", f"@{b['id']}", "--db", store_url, "--name", evil)
    assert r.rc == 2 and "same baseline" in r.stderr, r
