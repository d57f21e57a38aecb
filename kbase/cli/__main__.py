"""The ``kbase`` script and ``python -m kbase.cli``: the process policies (:mod:`kbase.cli.tuning`), then
a plain ``kbase top FILE`` answered without the command line (:mod:`kbase.cli.fast_top`), a plain
``kbase diff`` / ``gate`` likewise (:mod:`kbase.cli.fast_diff`), and a plain ``kbase history KERNEL`` as JSON or
CSV (:mod:`kbase.cli.fast_history`), else ``kbase.cli.main``, then the quick exit.
``main`` itself keeps ``sys.exit``, for callers in-process."""

from __future__ import annotations

import sys
from typing import NoReturn

from kbase.cli import tuning


def run() -> NoReturn:
    from kbase.cli.fast_top import answer

    code: object = answer(sys.argv)  # a plain ``kbase top FILE``: answered without Typer (it applies the policies)
    if code is None:
        tuning.apply()
        from kbase.cli.fast_diff import answer as answer_diff

        code = answer_diff(sys.argv)  # a plain stored ``kbase diff`` / ``gate``: answered without Typer
    if code is None:
        from kbase.cli.fast_history import answer as answer_history

        code = answer_history(sys.argv)  # a plain ``kbase history KERNEL -f json|csv``: likewise
    if code is None:
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
