"""The command line itself: the Typer app with every command registered, and ``main``, its entry point
(``kbase.cli`` loads this module on first use of ``app`` or ``main``)."""

from __future__ import annotations

import copy
import sys

import typer

from kbase.cli.errors import one_line
from kbase.cli.shared import app

__all__ = ["app", "main"]


def _register_commands() -> None:
    # Importing these modules adds their commands to ``app``.
    import kbase.cli.bisect  # noqa: F401
    import kbase.cli.budget  # noqa: F401
    import kbase.cli.demo  # noqa: F401
    import kbase.cli.diff  # noqa: F401
    import kbase.cli.report  # noqa: F401
    import kbase.cli.steps  # noqa: F401
    import kbase.cli.store  # noqa: F401
    import kbase.cli.top  # noqa: F401
    import kbase.cli.transfer  # noqa: F401


_register_commands()


def narrowed(argv: list[str]) -> typer.Typer:
    """``app`` holding only the command (or group) that ``argv[1]`` names: Typer builds the click object of
    every registered command at each start (~20 ms for kbase's 15), and a run needs one. Anything else
    (no command, an option first, an unknown name) gets the full app, so help and errors list everything."""
    from typer.main import get_command_name

    if len(argv) < 2 or argv[1].startswith("-"):
        return app
    name = argv[1]
    commands = [c for c in app.registered_commands
                if (c.name or (get_command_name(c.callback.__name__) if c.callback else None)) == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if len(commands) + len(groups) != 1:
        return app
    one = copy.copy(app)
    one.registered_commands = commands
    one.registered_groups = groups
    return one


def main() -> None:
    """Entry point: usage errors of the option parser are one line too (exit 2)."""
    import os
    import warnings

    from typer._click.exceptions import ClickException, NoArgsIsHelpError

    from kbase.cli.closed_stdout import guard_stdout

    guard_stdout()
    if not os.environ.get("KBASE_DEBUG"):
        # a dependency's warning (numpy's overflow, with its install path) is not the user's to read: kbase says
        # what matters in its own lines
        warnings.simplefilter("ignore")
    try:
        rc = narrowed(sys.argv)(standalone_mode=False)
    except NoArgsIsHelpError as exc:  # bare `kbase` / `kbase db`: the help, as --help prints it
        print(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        rc = 0
    except typer.Abort:
        print("kbase: aborted", file=sys.stderr)
        rc = 2
    except ClickException as exc:
        print(f"kbase: error: {one_line(exc.format_message())}", file=sys.stderr)
        rc = 2
    except KeyboardInterrupt:
        print("kbase: interrupted", file=sys.stderr)
        rc = 130
    finally:
        if "kbase.store.engine" in sys.modules:  # close pooled store connections before the process ends
            sys.modules["kbase.store.engine"].dispose_all()
    sys.exit(rc if isinstance(rc, int) else 0)
