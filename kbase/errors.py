"""Errors a user can act on.

The library raises them with the *field* and *value* at fault (``WindowError(field="gpu", value=9,
available=[0, 1])``) and a message about the problem, not about how the value was given: the CLI
knows whether ``gpu`` came from ``--gpu``, ``[tool.kbase] gpu`` or an environment variable and names
that (``kbase.cli.errors``). ``str(exc)`` is the library's own rendering (``gpu=9: ...``).

Exit codes: every ``KbaseError`` is 2 (bad input, usage, incomparable data); the CLI maps other
exceptions to 3 (internal error) in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_UNSET: Any = object()


class KbaseError(Exception):
    """Bad input or usage: exit code 2, one line, no traceback."""

    code = 2

    def __init__(self, message: str, *, field: str | None = None, value: Any = _UNSET,
                 available: Sequence[Any] | None = None, path: Path | str | None = None,
                 remedy: tuple[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field  # the setting at fault ("gpu", "marker", "db", ...), when one is
        self.value = value  # its value as given (unset: the field alone is named)
        self.available = list(available) if available is not None else None
        self.path = Path(path) if path is not None else None  # the file at fault, when one is
        self.remedy = remedy  # (setting, what setting it does): how the user can proceed

    def subject(self, label: Callable[[str, Any], str] | None = None) -> str:
        """What is at fault: ``label(field, value)`` (the CLI's flag names) or ``field=value``."""
        if self.field is None:
            return ""
        if label is not None:
            return label(self.field, self.value)
        if self.value is _UNSET:
            return self.field
        return f"{self.field}={self.value!r}"

    def render(self, label: Callable[[str, Any], str] | None = None) -> str:
        """One line: subject, message, and the values that would have worked."""
        subject = self.subject(label)
        text = f"{subject}: {self.message}" if subject else self.message
        if self.remedy is not None:
            setting, effect = self.remedy
            text += f" ({label(setting, _UNSET) if label else setting} {effect})"
        if self.available is not None and "available" not in self.message:
            shown = ", ".join(str(a) for a in self.available[:20])
            more = f", … ({len(self.available)} in all)" if len(self.available) > 20 else ""
            text += f" (available: {shown or 'none'}{more})"
        return text

    def __str__(self) -> str:
        return self.render()


class InputError(KbaseError):
    """A profile file or option value that cannot be used."""


class NoBaselineError(InputError):
    """A revision (or the whole store) has no baseline to compare with: the first run of a workload."""


class UnknownWorkloadError(InputError):
    """A named workload the store does not hold while it holds others: a typo (``close``: the stored name it is
    probably meant to be) or a workload's very first run (no close stored name)."""

    close: str | None = None
    stored: tuple[str, ...] = ()


class UnknownRevisionError(InputError):
    """A name that git does not resolve to a commit (``HEAD~1`` of a root commit, a typo)."""


class SettingsError(InputError):
    """A setting (flag, ``[tool.kbase]`` key or environment variable) with a bad value."""

    loading: Any = None  # raised while merging the settings: those settings (their origins name the culprit)


class WindowError(InputError):
    """The window options select nothing usable in this profile."""


class StoreError(KbaseError):
    """The baseline store cannot be opened or written."""


class IncomparableError(KbaseError):
    """The two sides of a comparison do not measure the same thing."""


def is_unset(value: Any) -> bool:
    return value is _UNSET
