"""The ``kbase`` script and ``python -m kbase.cli``: the process policies (:mod:`kbase.cli.tuning`), then
``kbase.cli.main``, then the quick exit. ``main`` itself keeps ``sys.exit``, for callers in-process."""

from __future__ import annotations

import sys
from typing import NoReturn

from kbase.cli import tuning


def run() -> NoReturn:
    tuning.apply()
    from kbase.cli import main

    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if code is None:
        code = 0
    if not isinstance(code, int):
        sys.exit(str(code))  # a message: let Python print it as usual
    tuning.leave(code)


if __name__ == "__main__":
    run()
