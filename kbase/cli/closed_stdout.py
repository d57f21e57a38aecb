"""A closed stdout (``kbase gate ... | head``, a reader that quit) never changes a command's exit code: the first
write or flush that meets a broken pipe points file descriptor 1 at the null device and the command goes on to
its own exit code, whatever it printed. Without this a passing gate exited 1 (Python's failed flush at exit)
or 3 (an internal error), which fails a CI step under ``set -o pipefail``."""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class ClosedPipeProof:
    """``stream`` (stdout), its writes and flushes swallowing a broken pipe; everything else is the stream's."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def _gone(self) -> None:
        self.reader_gone = True
        try:
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(null, self._stream.fileno())  # what is still buffered drains there, at exit too
            finally:
                os.close(null)
        except (OSError, ValueError):  # no file descriptor (a test's StringIO): nothing to redirect
            pass

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._gone()
            try:
                self._stream.flush()
            except OSError:
                pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """Put the guard around ``sys.stdout`` (once)."""
    if sys.stdout is not None and not isinstance(sys.stdout, ClosedPipeProof):
        sys.stdout = ClosedPipeProof(sys.stdout)
