"""``kbase history KERNEL`` as JSON or CSV, answered by the ``kbase`` script before the command line is built.

Typer (with click) and the command modules cost ~50 ms of a process's imports: a ninth of a 10,000-baseline
history's answer (benchmark S3). So, after ``cli.fast_top``, the script asks ``answer``: a plain ``kbase history
KERNEL`` — the kernel and only these options, each spelled as here: ``-f``/``--format`` ``json`` or ``csv``,
``-n``/``--limit``, ``--name``, ``--branch``, ``--all-workloads``, ``--db``, ``--repo``, ``--wide``,
``-q``/``--quiet`` — is answered here through the same settings, API calls (``kbase.history``,
``kbase.history_steps``), renderer (``render.formats.HISTORY``) and error mapping (``errors.failure``) as the
``history`` command (``cli.store``). Anything else (the table, another option, ``--help``, a value the command
line would judge, a settings error) answers None having done nothing, and the command line runs as always.
``KBASE_NO_FAST_HISTORY=1`` turns this path off.
"""

from __future__ import annotations

from typing import Any

_FLAGS = {"--all-workloads": "all_workloads", "--wide": "wide", "-q": "quiet", "--quiet": "quiet"}
_VALUES = {"-f": "format", "--format": "format", "-n": "limit", "--limit": "limit", "--name": "name",
           "--branch": "branch", "--db": "db", "--repo": "repo"}
_FORMATS = ("json", "csv")  # (``enums.HistoryFormat``'s values; the table is the command line's)


def parse(argv: list[str]) -> dict[str, Any] | None:
    """The options of a plain ``kbase history KERNEL ...`` (see the module's doc), or None."""
    from kbase.cli.fast_path import one_target, plain_options

    found = plain_options(argv, "history", _FLAGS, _VALUES, {
        "format": "table", "limit": None, "name": None, "branch": None, "all_workloads": False, "db": None,
        "repo": None, "wide": False, "quiet": False})
    return one_target(found, "kernel", _FORMATS)


def answer(argv: list[str]) -> int | None:
    """The exit code once ``argv`` is answered; None when this path does not apply (nothing printed, nothing
    read: the command line runs)."""
    from kbase.cli.fast_path import answer_plain

    return answer_plain(argv, "KBASE_NO_FAST_HISTORY", parse, _history)  # (the script applied the policies)


def _history(opts: dict[str, Any], settings: Any) -> None:
    """What the ``history`` command does with these options (``cli.store.history``), JSON or CSV."""
    import kbase
    from kbase.cli.output import console, default_limit
    from kbase.render.formats import HISTORY, HistoryJob, Sink

    h = kbase.history(opts["kernel"], settings, workload=opts["name"], branch=opts["branch"],
                      all_workloads=opts["all_workloads"])
    found = kbase.history_steps(h)
    job = HistoryJob(h, found, opts["branch"], default_limit(opts["format"], opts["limit"]), wide=opts["wide"],
                     quiet=opts["quiet"])
    HISTORY.render(opts["format"], job, Sink.stdout(console))
