"""What the pre-Typer answers share (``cli.fast_top``, ``cli.fast_diff``, ``cli.fast_history``): a plain command
answered before the command line is built loads its settings as ``make_settings`` does and runs as the command
line runs a command (closed-pipe guard, one-line errors with the command's exit code, store connections closed).
Each of those modules only parses its command's plain form; every answer goes through the command's own API call
and renderer, and anything else is the command line's (tests hold each path equal to Typer's)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any


def plain_options(argv: list[str], command: str, flags: Mapping[str, str], values: Mapping[str, str],
                  defaults: Mapping[str, Any], at_most: int = 1) -> tuple[dict[str, Any], list[str]] | None:
    """(options by key, positional arguments) of ``kbase COMMAND ...`` when every argument is one of ``flags``
    (switches: key -> True), ``values`` (options taking a value: ``--x v`` or ``--x=v``) or a positional (at most
    ``at_most``, none starting with ``-``), each option at most once; ``defaults`` for the rest. None otherwise —
    ``--help``, another option, a repeated one, a missing, empty or option-like value: the command line's to
    judge, with its own messages."""
    if len(argv) < 2 or argv[1] != command:
        return None
    got = dict(defaults)
    seen: set[str] = set()
    positional: list[str] = []
    args = iter(argv[2:])
    for arg in args:
        name, value = arg, None
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
        if name in flags and value is None:
            key = flags[name]
            got[key] = True
        elif name in values:
            key = values[name]
            value = next(args, None) if value is None else value
            if not value or value.startswith("-"):
                return None
            got[key] = value
        elif arg and not arg.startswith("-") and len(positional) < at_most:
            positional.append(arg)
            continue
        else:
            return None
        if key in seen:
            return None
        seen.add(key)
    return got, positional


def one_target(found: tuple[dict[str, Any], list[str]] | None, key: str, formats: Collection[str]
               ) -> dict[str, Any] | None:
    """``plain_options``' answer for a command of one positional argument (stored under ``key``), a ``format``
    among ``formats`` and an optional ``limit`` (a whole number); None when it is not that."""
    if found is None or len(found[1]) != 1 or found[0]["format"] not in formats:
        return None
    got, positional = found
    got[key] = positional[0]
    if got["limit"] is not None:
        got["limit"] = whole_number(got["limit"])
        if got["limit"] is None:
            return None
    return got


def whole_number(text: str | None) -> int | None:
    """``text`` as the non-negative whole number a ``--limit`` takes, or None (what the command line would judge)."""
    if text is None or not (text.isascii() and text.isdigit()) or len(text) > 18:
        return None
    return int(text)


def answer_plain(argv: list[str], switch: str, parse: Callable[[list[str]], dict[str, Any] | None],
                 work: Callable[[dict[str, Any], Any], int | None]) -> int | None:
    """The exit code of a plain command answered here: ``parse`` (its options, or None), the settings its
    ``--repo`` / ``--db`` / ``--name`` mean, then ``work(options, settings)`` run as the command line runs a
    command; None (nothing printed, nothing read: the command line runs) when ``switch`` is set in the
    environment, ``parse`` declines, or the settings have an error (the command line words it)."""
    if os.environ.get(switch, "") not in ("", "0"):
        return None
    opts = parse(argv)
    if opts is None:
        return None
    settings = load_settings(opts["repo"], opts["db"], opts.get("name"))
    if settings is None:
        return None
    return run_as_command(settings, lambda: work(opts, settings))


def load_settings(repo: str | None, db: str | None, name: str | None = None) -> Any:
    """The command's ``Settings`` (as ``make_settings`` loads them for these flags), dependencies' warnings off
    as the command line turns them off; None on a settings error (the command line words it, naming the flag
    or key)."""
    import warnings

    from kbase.settings import Settings

    if not os.environ.get("KBASE_DEBUG"):
        warnings.simplefilter("ignore")  # as the command line does
    try:
        return Settings.load(repo=None if repo is None else Path(repo), db=db, name=name, window={})
    except Exception:  # noqa: BLE001 - the command line says what is wrong, naming the flag or key
        return None


def run_as_command(settings: Any, work: Callable[[], int | None]) -> int:
    """``work`` (the command's API call and renderer; its exit code, None for 0) run as the command line runs a
    command: stdout guarded against a closed pipe, an error one line on stderr with the command's exit code
    (``errors.failure``, naming what ``settings`` holds: the settings, or a function returning those the command
    made), store connections closed after; the exit code."""
    from kbase.cli.closed_stdout import guard_stdout

    guard_stdout()
    try:
        code = work()
    except KeyboardInterrupt:
        print("kbase: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - mapped as the command line maps it (``errors.failure``)
        from kbase.cli.errors import failure
        from kbase.errors import KbaseError

        if os.environ.get("KBASE_DEBUG") and not isinstance(exc, KbaseError | UnicodeEncodeError):
            raise
        code, line = failure(exc, settings() if callable(settings) else settings)
        print(line, file=sys.stderr)
        return code
    finally:
        if "kbase.store.engine" in sys.modules:  # close pooled store connections before the process ends
            sys.modules["kbase.store.engine"].dispose_all()
    return code or 0
