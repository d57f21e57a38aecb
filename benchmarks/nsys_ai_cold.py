"""Run the ``nsys-ai`` CLI with DuckDB's automatic extension *download* turned off (``autoinstall_known_
extensions``), nothing else changed.

Without network access DuckDB's attempt to download its ``sqlite_scanner`` extension waits ~11 s on a
connection timeout before nsys-ai falls back to Python's sqlite3; a machine with the extension installed
still autoloads it (autoloading is a separate setting). Used as ``PYTHON nsys_ai_cold.py ARGS...`` by
``top_bench.py`` with the interpreter of an environment where nsys-ai is installed.
"""

import sys

import duckdb

_connect = duckdb.connect


def _no_download(*args, **kwargs):
    config = dict(kwargs.pop("config", None) or {})
    config.setdefault("autoinstall_known_extensions", False)
    return _connect(*args, config=config, **kwargs)


duckdb.connect = _no_download

from nsys_ai.__main__ import main  # noqa: E402

sys.argv[0] = "nsys-ai"
sys.exit(main())
