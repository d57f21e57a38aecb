"""``kbase top FILE`` answered before the command line is built, when the answer needs no reading.

Typer (with click) and the command modules cost a process ~60 ms of imports, more than the rest of an
answer from the top cache (``store.top_cache``) or the store. So the ``kbase`` script first asks ``answer``:
a plain ``kbase top FILE`` — the profile and only these options, each spelled as here: ``-f``/``--format``,
``-n``/``--limit``, ``--db``, ``--repo``, ``--wide``, ``--full-names``, ``-q``/``--quiet``, ``--per-gpu`` — whose
leaderboard is stored or cached, is printed through the same renderers (``cli.output``). Anything else
(another option, ``--help``, an option's value the command line would judge, a settings error, a profile
neither stored nor cached) answers None having printed nothing, and the command line runs as always, with
its own parsing and messages. ``KBASE_NO_FAST_TOP=1`` turns this path off.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

_FLAGS = {"--wide": "wide", "--full-names": "full_names", "-q": "quiet", "--quiet": "quiet", "--per-gpu": "per_gpu"}
_VALUES = {"-f": "format", "--format": "format", "-n": "limit", "--limit": "limit", "--db": "db", "--repo": "repo"}


def parse(argv: list[str]) -> dict[str, Any] | None:
    """The options of a plain ``kbase top FILE ...`` (see the module's doc), or None."""
    if len(argv) < 3 or argv[1] != "top":
        return None
    got: dict[str, Any] = {"format": "table", "limit": None, "wide": False, "full_names": False, "quiet": False,
                           "per_gpu": False, "profile": None, "db": None, "repo": None}
    seen: set[str] = set()
    args = iter(argv[2:])
    for arg in args:
        name, value = arg, None
        if arg.startswith("--") and "=" in arg:
            name, value = arg.split("=", 1)
        if name in _FLAGS and value is None:
            key = _FLAGS[name]
            got[key] = True
        elif name in _VALUES:
            key = _VALUES[name]
            value = next(args, None) if value is None else value
            if value is None:
                return None
            got[key] = value
        elif not arg.startswith("-") and arg and got["profile"] is None:
            key, got["profile"] = "profile", arg
        else:
            return None
        if key in seen:
            return None  # a repeated option: the command line says what it makes of it
        seen.add(key)
    if got["profile"] is None or got["format"] not in _formats():
        return None
    if got["limit"] is not None:
        if not (got["limit"].isascii() and got["limit"].isdigit()) or len(got["limit"]) > 18:
            return None
        got["limit"] = int(got["limit"])
    return got


def _formats() -> set[str]:
    from kbase.enums import LeaderboardFormat

    return {f.value for f in LeaderboardFormat}


def answer(argv: list[str]) -> int | None:
    """The exit code once ``argv``'s answer is printed; None when this path does not apply (nothing printed)."""
    if os.environ.get("KBASE_NO_FAST_TOP", "") not in ("", "0"):
        return None
    opts = parse(argv)
    if opts is None:
        return None
    try:
        lb = _stored_or_cached(opts)
    except KeyboardInterrupt:
        print("kbase: interrupted", file=sys.stderr)
        return 130
    except Exception:  # noqa: BLE001 - whatever went wrong, the command line runs and says it in its own words
        return None
    if lb is None:
        return None
    from kbase.cli.closed_stdout import guard_stdout
    from kbase.cli.output import default_limit, emit_leaderboard

    guard_stdout()
    try:
        emit_leaderboard(lb, opts["format"], default_limit(opts["format"], opts["limit"]), wide=opts["wide"],
                         full_names=opts["full_names"], quiet=opts["quiet"])
    except KeyboardInterrupt:
        print("kbase: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - as the command line reports an unexpected error (exit 3)
        if os.environ.get("KBASE_DEBUG"):
            raise
        from kbase.cli.errors import error_line

        line = error_line(exc, None, labels=False)
        print(f"kbase: internal error: {type(exc).__name__}: {line} (set KBASE_DEBUG=1 for a traceback)",
              file=sys.stderr)
        return 3
    return 0


def _stored_or_cached(opts: dict[str, Any]) -> Any:
    import warnings

    from kbase.api.top_answer import answer_at_once
    from kbase.settings import Settings

    if not os.environ.get("KBASE_DEBUG"):
        warnings.simplefilter("ignore")  # as the command line does
    settings = Settings.load(repo=None if opts["repo"] is None else Path(opts["repo"]), db=opts["db"], window={})
    return answer_at_once(Path(opts["profile"]), settings, per_gpu=opts["per_gpu"])
