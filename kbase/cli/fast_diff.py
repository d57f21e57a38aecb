"""``kbase diff A [B]`` and ``kbase gate [A] [B]`` answered by the ``kbase`` script before the command line is built.

Typer (with click) and the command modules cost a stored diff or gate of 2,000 kernels ~45 ms of its ~0.6 s
(imports, the click command built from the signatures, the parse), for a call that is a handful of strings. So
the script asks ``answer`` (after the process policies, ``cli.tuning``): a plain diff or gate — revisions (at most
two, none starting with ``-``) and only ``--db`` and ``-f``/``--format``, each at most once — runs here the code
the command runs (``cli.diff_run``: the same settings, API call, renderers and exit code) with the values the
command would get (every other flag at its default), and errors map as the command line maps them
(``cli.errors.failure``: one line, its exit code). Anything else (another option, ``--help``, ``--``, a
repeated flag) answers None having done nothing, and the command line runs as always, with its own parsing and
messages. ``KBASE_NO_FAST_DIFF=1`` turns this path off (``tests/cli/test_fast_diff.py`` holds the two alike).
"""

from __future__ import annotations

import os
from typing import Any

_VALUES = {"--db": "db", "-f": "fmt", "--format": "fmt"}


def parse(argv: list[str]) -> tuple[str, list[str], dict[str, str]] | None:
    """(command, its revisions, its flags by parameter) of a plain ``kbase diff`` / ``kbase gate``, or None."""
    from kbase.cli.fast_path import plain_options

    command = argv[1] if len(argv) > 1 else ""
    found = plain_options(argv, command, {}, _VALUES, {}, at_most=2) if command in ("diff", "gate") else None
    if found is None or (command == "diff" and not found[1]):
        return None  # (diff's before side is required: the command line's usage error)
    flags, revisions = found
    return command, revisions, flags


def answer(argv: list[str]) -> int | None:
    """The exit code once ``argv`` is answered; None when this path does not apply (nothing printed, nothing
    read: the command line runs). Call after ``tuning.apply``, as the command line runs."""
    if os.environ.get("KBASE_NO_FAST_DIFF", "") not in ("", "0"):
        return None
    parsed = parse(argv)
    if parsed is None:
        return None
    command, revisions, flags = parsed
    from kbase.cli.diff_run import run_diff, run_gate
    from kbase.cli.fast_path import run_as_command
    from kbase.cli.settings_flags import WINDOW_FLAGS, current_settings

    if not os.environ.get("KBASE_DEBUG"):
        import warnings

        warnings.simplefilter("ignore")  # as the command line does (``cli.entry.main``)
    a, b = (revisions + [None, None])[:2]
    kwargs: dict[str, Any] = {**flags, "window": dict.fromkeys(WINDOW_FLAGS)}
    if command == "diff":
        return run_as_command(current_settings, lambda: run_diff(revisions[0], b, **kwargs))  # (``parse`` found
    return run_as_command(current_settings, lambda: run_gate(a, b, **kwargs))              # diff's before side)
