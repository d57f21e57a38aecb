"""``kbase top FILE`` answered by the ``kbase`` script before the command line is built.

Typer (with click) and the command modules cost a process ~60 ms of imports (more under load), a third of a
small export's whole answer and more than an answer from the top cache (``store.top_cache``) or the store.
So the script first asks ``answer``: a plain ``kbase top FILE`` — the profile and only these options, each
spelled as here: ``-f``/``--format``, ``-n``/``--limit``, ``--db``, ``--repo``, ``--wide``, ``--full-names``,
``-q``/``--quiet``, ``--per-gpu``, ``--no-store``, ``--no-cache`` — is answered here: from the store or the
top cache, else by reading the file, through the same API call (``api.top_answer``), renderers
(``cli.output``) and error mapping (``cli.errors.failure``) as the command. Anything else (another option,
``--help``, a value the command line would judge, a settings error) answers None having done nothing, and
the command line runs as always, with its own parsing and messages. ``KBASE_NO_FAST_TOP=1`` turns this
path off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_FLAGS = {"--wide": "wide", "--full-names": "full_names", "-q": "quiet", "--quiet": "quiet", "--per-gpu": "per_gpu",
          "--no-store": "no_store", "--no-cache": "no_cache"}
_VALUES = {"-f": "format", "--format": "format", "-n": "limit", "--limit": "limit", "--db": "db", "--repo": "repo"}


def parse(argv: list[str]) -> dict[str, Any] | None:
    """The options of a plain ``kbase top FILE ...`` (see the module's doc), or None."""
    from kbase.cli.fast_path import one_target, plain_options

    found = plain_options(argv, "top", _FLAGS, _VALUES, {
        "format": "table", "limit": None, "wide": False, "full_names": False, "quiet": False, "per_gpu": False,
        "no_store": False, "no_cache": False, "db": None, "repo": None})
    return one_target(found, "profile", _formats())


def _formats() -> set[str]:
    from kbase.enums import LeaderboardFormat

    return {f.value for f in LeaderboardFormat}


def answer(argv: list[str]) -> int | None:
    """The exit code once ``argv`` is answered; None when this path does not apply (nothing printed, nothing
    read: the command line runs)."""
    from kbase.cli.fast_path import answer_plain

    return answer_plain(argv, "KBASE_NO_FAST_TOP", parse, _emit)


def _emit(opts: dict[str, Any], settings: Any) -> None:
    from kbase.cli.output import default_limit, emit_leaderboard

    emit_leaderboard(_leaderboard(opts, settings), opts["format"], default_limit(opts["format"], opts["limit"]),
                     wide=opts["wide"], full_names=opts["full_names"], quiet=opts["quiet"])


def _leaderboard(opts: dict[str, Any], settings: Any) -> Any:
    """The stored or cached answer; else the file read (the process policies first: numpy comes next)."""
    from kbase.api.top_answer import answer_at_once, top

    path = Path(opts["profile"])
    from_store, cache = not opts["no_store"], not (opts["no_store"] or opts["no_cache"])
    got = answer_at_once(path, settings, per_gpu=opts["per_gpu"], from_store=from_store, cache=cache)
    if got is not None:
        return got
    from kbase.cli import tuning
    from kbase.cli.output import reading_progress

    tuning.apply()
    with reading_progress(path.name, quiet=opts["quiet"]) as progress:  # (the store was asked just now)
        return top(path, settings, per_gpu=opts["per_gpu"], progress=progress, from_store=False, stored_rows=True,
                   cache=cache, samples=False)  # (none shown: the per-iteration sums would be thrown away)
