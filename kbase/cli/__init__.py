"""The ``kbase`` command line: parse -> ``Settings`` -> one ``kbase.api`` call -> render.

Exit codes: 0 ok, 1 regression found (gate), 2 bad input / usage, 3 internal error. Errors are
mapped to exit codes in one place (``kbase.cli.app.KbaseGroup``), so Typer's ``CliRunner`` sees
what a shell sees.
"""

from __future__ import annotations

import sys

from kbase.cli.app import app
from kbase.cli.errors import one_line

__all__ = ["app", "main"]


def _register_commands() -> None:
    # Importing these modules adds their commands to ``app``.
    import kbase.cli.demo  # noqa: F401
    import kbase.cli.diff  # noqa: F401
    import kbase.cli.steps  # noqa: F401
    import kbase.cli.store  # noqa: F401
    import kbase.cli.top  # noqa: F401


_register_commands()


def main() -> None:
    """Entry point: usage errors of the option parser are one line too (exit 2)."""
    import typer
    from typer._click.exceptions import ClickException, NoArgsIsHelpError

    try:
        rc = app(standalone_mode=False)
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
