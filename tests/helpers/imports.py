"""What a command loads: ``loaded`` runs ``kbase ARGS`` in a fresh interpreter (as the ``kbase`` script does) and
reports which of the heavy modules ended up in ``sys.modules``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


def loaded(*args: str, cwd: Path, env: dict[str, str] | None = None, watch: tuple[str, ...] = HEAVY
           ) -> tuple[int, set[str]]:
    """(exit code, heavy modules loaded) of ``kbase ARGS`` run in a fresh interpreter."""
    import os

    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KBASE_")}, **(env or {})}
    p = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(args)), json.dumps(watch)], cwd=cwd, env=env,
                       capture_output=True, text=True, timeout=120)
    tail = p.stderr.rsplit("\nMODULES ", 1)
    assert len(tail) == 2, p.stderr[-2000:]
    got = json.loads(tail[1])
    return got["rc"], set(got["heavy"])
