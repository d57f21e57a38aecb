"""The built wheel works outside the source tree: the top-level ``migrations/`` (the one copy of the Alembic
scripts) ships inside it as ``kbase/migrations``, so an installed ``kbase`` creates a new store at head and
upgrades a store made at the first revision (0001).

Offline by design: the wheel is built without build isolation (the dev environment's hatchling) and
installed with ``--no-deps --no-index`` into a fresh virtual environment; that environment finds
kbase's dependencies through a ``.pth`` line naming the dev environment's site-packages (a path
entry only: the dev environment's editable-install hook for the source tree is not run there).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from kbase.synth.generate import ExportSpec, generate_export

from helpers.shared import REPO

pytestmark = pytest.mark.slow

FULL_HASH = "89abcdef0123456789abcdef0123456789abcdef"
TIMEOUT = 300


def run(argv, cwd: Path, env: dict | None = None, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that would put the source tree or a store on the path."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "KBASE_DB", "KBASE_DEBUG", "VIRTUAL_ENV",
                        "PYTHONSTARTUP")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def build_wheel(outdir: Path) -> Path:
    try:
        import build  # noqa: F401
        import hatchling  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"cannot build the wheel offline: {exc.name} is not installed "
                    "(pip install 'kbase[test]')")
    res = run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", outdir], cwd=REPO,
              env=clean_env())
    assert res.returncode == 0, f"wheel build failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    wheels = sorted(outdir.glob("gpu_kbase-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_ships_migrations_and_migrates_a_new_store(tmp_path):
    wheel = build_wheel(tmp_path / "dist")

    # the top-level migrations/ is inside the package, not a top-level "migrations" package
    names = zipfile.ZipFile(wheel).namelist()
    assert "kbase/migrations/env.py" in names and "kbase/migrations/script.py.mako" in names
    versions = sorted(Path(src) for src in (REPO / "migrations" / "versions").glob("*.py"))
    assert versions
    for v in versions:
        assert f"kbase/migrations/versions/{v.name}" in names
    assert [n for n in names if "/migrations/" in n] == [f"kbase/migrations/{n}" for n in (
        "env.py", "script.py.mako", *(f"versions/{v.name}" for v in versions))], "one copy of the migrations"
    assert not [n for n in names if n.startswith("migrations/")], (
        "wheel installs a top-level migrations package")
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]

    # a fresh environment with the wheel installed (before the dependencies are made visible, so
    # pip sees no other kbase)
    venv = tmp_path / "venv"
    res = run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp_path, env=clean_env())
    assert res.returncode == 0, res.stderr
    vpy = venv / "bin" / "python"
    res = run([sys.executable, "-m", "pip", "--python", vpy, "install", "--no-deps", "--no-index", wheel],
              cwd=tmp_path, env=clean_env())
    assert res.returncode == 0, f"pip install failed:\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
    res = run([vpy, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp_path,
              env=clean_env())
    site = Path(res.stdout.strip())
    deps = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    (site / "_kbase_test_deps.pth").write_text("".join(f"{p}\n" for p in deps))

    work = tmp_path / "elsewhere"  # not the source tree, not a git repository
    work.mkdir()
    env = clean_env()
    res = run([vpy, "-c", "import kbase, kbase.store.engine; print(kbase.__file__); "
                          "print(kbase.store.engine.migrations_dir())"],
              cwd=work, env=env)
    assert res.returncode == 0, res.stderr
    pkg_file, mig_dir = (Path(line) for line in res.stdout.split())
    assert pkg_file.is_relative_to(site), f"imported kbase from {pkg_file}, not the wheel"
    assert mig_dir == site / "kbase" / "migrations"

    export = work / "w.sqlite"
    generate_export(export, ExportSpec(n_gpus=2, iterations=4))
    kbase = venv / "bin" / "kbase"
    assert kbase.is_file()
    db_path = tmp_path / "new" / "new.db"
    db = f"sqlite:///{db_path}"
    res = run([kbase, "snapshot", export, "--db", db, "--no-git", "--rev", FULL_HASH, "--name", "wheel",
               "--format", "json"], cwd=work, env=env)
    assert res.returncode == 0, res.stderr
    assert "stored baseline @1" in res.stderr
    assert db_path.is_file()

    res = run([kbase, "db", "current", "--db", db], cwd=work, env=env)
    assert res.returncode == 0, res.stderr
    assert "up to date" in res.stdout, res.stdout
    from alembic.script import ScriptDirectory

    from kbase.store.engine import alembic_config

    head = ScriptDirectory.from_config(alembic_config(db)).get_current_head()
    assert f"revision {head}, head {head}" in res.stdout

    res = run([kbase, "list", "--db", db, "--format", "json"], cwd=work, env=env)
    assert res.returncode == 0, res.stderr
    assert '"workload": "wheel"' in res.stdout
    assert not (work / ".kbase").exists()

    # a store created at the first revision by the installed scripts, then upgraded by the installed kbase
    old = f"sqlite:///{tmp_path / 'old.db'}"
    make_first = ("import sys; from alembic import command; from kbase.store.engine import alembic_config; "
                  "command.upgrade(alembic_config(sys.argv[1]), '0001')")
    res = run([vpy, "-c", make_first, old], cwd=work, env=env)
    assert res.returncode == 0, res.stderr
    res = run([kbase, "db", "current", "--db", old], cwd=work, env=env)
    assert res.returncode == 0 and f"revision 0001, head {head}" in res.stdout, res.stdout + res.stderr
    res = run([kbase, "db", "upgrade", "--db", old], cwd=work, env=env)
    assert res.returncode == 0, res.stderr
    res = run([kbase, "db", "current", "--db", old], cwd=work, env=env)
    assert "up to date" in res.stdout and f"revision {head}, head {head}" in res.stdout, res.stdout

    # and one holding a baseline, taken back to 0001 and opened by a command: upgraded, nothing lost
    to_first = ("import sys; from alembic import command; from kbase.store.engine import alembic_config; "
                "command.downgrade(alembic_config(sys.argv[1]), '0001')")
    res = run([vpy, "-c", to_first, db], cwd=work, env=env)
    assert res.returncode == 0, res.stderr
    res = run([kbase, "db", "current", "--db", db], cwd=work, env=env)
    assert f"revision 0001, head {head}" in res.stdout, res.stdout
    res = run([kbase, "list", "--db", db, "--format", "json"], cwd=work, env=env)
    assert res.returncode == 0, res.stderr
    assert '"workload": "wheel"' in res.stdout
    res = run([kbase, "db", "current", "--db", db], cwd=work, env=env)
    assert f"revision {head}, head {head}" in res.stdout, res.stdout
