"""Errors a user can act on. The CLI prints them as one line on stderr and exits with ``code``."""


class KbaseError(Exception):
    """Bad input or usage: exit code 2, one line, no traceback."""

    code = 2


class InputError(KbaseError):
    """A profile file or option value that cannot be used."""


class StoreError(KbaseError):
    """The baseline store cannot be opened or written."""
