"""The ``kbase`` command line: parse -> ``Settings`` -> one ``kbase.api`` call -> render.

Exit codes: 0 ok, 1 regression found (gate), 2 bad input / usage, 3 internal error. Errors are
mapped to exit codes in one place (``kbase.cli.shared.KbaseGroup``), so Typer's ``CliRunner`` sees
what a shell sees.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kbase.cli.entry import app, main, narrowed

__all__ = ["app", "main", "narrowed"]


def __getattr__(name: str) -> Any:
    """``app``, ``main`` and ``narrowed`` load the command line (Typer and every command) on first use: the
    ``kbase`` script answers ``kbase top FILE`` of a stored or cached file without it (``cli.fast_top``)."""
    if name in ("app", "main", "narrowed"):
        from kbase.cli import entry

        value = getattr(entry, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kbase.cli' has no attribute {name!r}")
