"""Project settings from ``[tool.kbase]`` in ``pyproject.toml`` (profile, name, window, db, gate).

Example::

    [tool.kbase]
    db = ".kbase/kbase.db"          # or a postgresql+psycopg:// URL
    profile = "out/train.sqlite"    # what a bare `kbase snapshot` reads
    name = "train-8gpu"
    marker = "^ProfilerStep#"
    warmup = 2

    [tool.kbase.gate]
    max_increase_pct = 5.0
    ignore = ["*memcpy*"]
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from kbase.errors import InputError

WINDOW_KEYS = {"marker": str, "iteration_kernel": str, "iterations": str, "warmup": int, "gpu": int}
TOP_KEYS = {"db": str, "profile": str, "name": str, "gate": dict, "trim": list, **WINDOW_KEYS}


def find_project_root(start: Path | None = None) -> Path:
    """The git top level above ``start`` (or the current directory), else ``start`` itself."""
    here = (start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / ".git").exists():
            return d
    return here


def load_tool_config(root: Path) -> dict:
    path = root / "pyproject.toml"
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: malformed TOML ({exc})") from None
    cfg = data.get("tool", {}).get("kbase", {})
    if not isinstance(cfg, dict):
        raise InputError(f"{path}: [tool.kbase] must be a table")
    for key, value in cfg.items():
        want = TOP_KEYS.get(key)
        if want is None:
            raise InputError(f"{path}: [tool.kbase] unknown key {key!r} (known: {', '.join(sorted(TOP_KEYS))})")
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            raise InputError(f"{path}: [tool.kbase] {key} must be a {want.__name__}, got {value!r}")
    if "trim" in cfg and (len(cfg["trim"]) != 2 or not all(isinstance(x, (int, float)) for x in cfg["trim"])):
        raise InputError(f"{path}: [tool.kbase] trim must be [START, END] in seconds")
    return cfg
