"""Each command imports only what it uses: the store's listing commands never load pandas or pyarrow
(nor numpy), and ``--help`` loads neither the store stack nor the data stack.

Each case runs the real CLI entry point in a fresh interpreter (``kbase.cli.main``, as the ``kbase``
script does) and then reports which of the heavy modules ended up in ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pandas", "pyarrow", "numpy", "scipy", "sqlalchemy", "sqlmodel", "pydantic", "alembic", "git")

_PROBE = """
import json, sys
watch = json.loads(sys.argv[2])
sys.argv = ["kbase", *json.loads(sys.argv[1])]
from kbase.cli import main
try:
    main()
except SystemExit as exc:
    rc = exc.code
else:
    rc = 0
sys.stdout.flush()
sys.stderr.write("\\nMODULES " + json.dumps({"rc": rc, "heavy": [m for m in watch if m in sys.modules]}))
"""


def loaded(*args: str, cwd: Path) -> tuple[int, set[str]]:
    """(exit code, heavy modules loaded) of ``kbase ARGS`` run in a fresh interpreter."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("KBASE_")}
    p = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(args)), json.dumps(HEAVY)], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=120)
    tail = p.stderr.rsplit("\nMODULES ", 1)
    assert len(tail) == 2, p.stderr[-2000:]
    got = json.loads(tail[1])
    return got["rc"], set(got["heavy"])


@pytest.fixture(scope="module")
def small_store(tmp_path_factory) -> tuple[str, str, Path]:
    from kbase.store import open_store
    from kbase.synth.history import write_bulk_history

    root = tmp_path_factory.mktemp("imports")
    url = f"sqlite:///{root / 'kb.db'}"
    store = open_store(url)
    try:
        write_bulk_history(store.engine, 5, workload="bulk", n_kernels=6, iterations=4)
        from sqlalchemy import text

        with store.engine.connect() as conn:
            name = conn.execute(text("SELECT name FROM kernel_name ORDER BY id LIMIT 1")).scalar_one()
    finally:
        store.close()
    return url, name, root


DATA_STACK = {"pandas", "pyarrow", "numpy", "scipy"}


@pytest.mark.parametrize("args", [
    ("list",), ("list", "--format", "json"), ("history", "{name}"), ("history", "{name}", "--format", "json"),
    ("history", "{name}", "--format", "csv"), ("db", "current"), ("db", "upgrade"),
])
def test_store_listing_commands_do_not_load_the_data_stack(small_store, args):
    url, name, root = small_store
    rc, heavy = loaded(*(a.format(name=name) for a in args), "--db", url, cwd=root)
    assert rc == 0
    # the history table runs step detection over the kernel's levels: numpy (0.06 s), never pandas
    allowed = {"numpy"} if args == ("history", "{name}") else set()
    assert not heavy & (DATA_STACK - allowed), f"kbase {' '.join(args[:1])} loaded {sorted(heavy & DATA_STACK)}"
    assert "sqlalchemy" in heavy  # the probe sees what the command imported (it did reach the store)


def test_help_loads_neither_the_store_nor_the_data_stack(tmp_path):
    rc, heavy = loaded("--help", cwd=tmp_path)
    assert rc == 0
    assert not heavy, f"kbase --help loaded {sorted(heavy)}"


def test_show_loads_pandas_for_the_leaderboard(small_store):
    """The probe can fail: ``show`` renders a leaderboard (a DataFrame), so pandas is there."""
    url, _, root = small_store
    rc, heavy = loaded("show", "@1", "--db", url, cwd=root)
    assert rc == 0 and "pandas" in heavy
