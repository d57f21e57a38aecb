"""The ``kbase`` script and ``python -m kbase.cli``: the process policies (:mod:`kbase.cli.tuning`), then
``kbase top FILE`` answered at once when it can be (:mod:`kbase.cli.fast_top`), else ``kbase.cli.main``, then
the quick exit. ``main`` itself keeps ``sys.exit``, for callers in-process."""

from __future__ import annotations

import sys
from typing import NoReturn

from kbase.cli import tuning


def run() -> NoReturn:
    from kbase.cli.fast_top import answer

    code: object = answer(sys.argv)  # ``kbase top FILE`` of a stored or cached file: printed without Typer
    if code is None:
        tuning.apply()  # (the answer above loads no numpy: the policies still come first for every reader)
        from kbase.cli import main

        try:
            main()
            code = 0
        except SystemExit as exc:
            code = exc.code
    if code is None:
        code = 0
    if not isinstance(code, int):
        sys.exit(str(code))  # a message: let Python print it as usual
    tuning.leave(code)


if __name__ == "__main__":
    run()
