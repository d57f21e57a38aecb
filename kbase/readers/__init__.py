"""Stage 1 — read a profile: detect the format from the file's content and hand it to its reader."""

from __future__ import annotations

import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kbase.enums import ProfileFormat
from kbase.errors import InputError

if TYPE_CHECKING:  # the profile module loads pandas: not for ``readers.source`` (kbase top from the store)
    from kbase.readers.profile import Profile

Progress = Callable[[int, int], None]  # (rows read now, rows in all)

SQLITE_MAGIC = b"SQLite format 3\x00"
NSYS_REPORT_SUFFIXES = (".nsys-rep", ".qdrep")


def _head(path: Path, n: int = 16) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read(n)
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror})") from None


@dataclass(frozen=True)
class Reader:
    """One input format: ``sniff(path, head)`` says whether a regular file is one (``head``: its first 16
    bytes; the cheapest evidence first), ``read(path, progress, options)`` reads it. ``directory``: the format
    can also be a directory (of per-rank files)."""

    format: ProfileFormat
    sniff: Callable[[Path, bytes], bool]
    read: Callable[[Path, Progress | None, ReadOptions], Profile]
    directory: bool = False


@dataclass(frozen=True)
class ReadOptions:
    allow_missing_ranks: bool = False
    nsys_timeout: float | str | None = None


def _read_nsys(path: Path, progress: Progress | None, options: ReadOptions) -> Profile:
    from kbase.readers.nsys import read_nsys

    return read_nsys(path, progress)


def _read_report(path: Path, progress: Progress | None, options: ReadOptions) -> Profile:
    from kbase.readers.nsys_report import read_report

    return read_report(path, progress, options.nsys_timeout)


def _read_kineto(path: Path, progress: Progress | None, options: ReadOptions) -> Profile:
    from kbase.readers.kineto import read_kineto

    if progress is None:
        return read_kineto(path, allow_missing_ranks=options.allow_missing_ranks)
    from kbase.readers.kineto_json import READ_POSITION

    token = READ_POSITION.set(_byte_progress(path, progress))
    try:
        return read_kineto(path, allow_missing_ranks=options.allow_missing_ranks)
    finally:
        READ_POSITION.reset(token)


def _looks_like_kineto(path: Path, head: bytes) -> bool:
    from kbase.readers.kineto import looks_like_kineto

    return looks_like_kineto(path)


# The readers, in the order their sniffers are asked (a new input format: one entry here, its enum value in
# ``enums.ProfileFormat``, and its module; docs/architecture.md has a worked example).
READERS: tuple[Reader, ...] = (
    Reader(ProfileFormat.NSYS_SQLITE, lambda path, head: head.startswith(SQLITE_MAGIC), _read_nsys),
    Reader(ProfileFormat.NSYS_REP, lambda path, head: path.suffix in NSYS_REPORT_SUFFIXES, _read_report),
    Reader(ProfileFormat.KINETO, _looks_like_kineto, _read_kineto, directory=True),
)
READER_OF = {r.format: r for r in READERS}


def detect_format(path: Path) -> ProfileFormat:
    """The format of ``path`` (the first reader whose sniffer knows it); a clear error for anything else."""
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(st.st_mode):
        from kbase.readers.kineto_json import _trace_files_in

        try:
            candidates = _trace_files_in(path)
        except OSError as exc:
            raise InputError(f"{path}: cannot list the directory ({exc.strerror or exc})") from None
        if candidates:  # the Kineto reader says which file is what (and which cannot be read)
            return next(r.format for r in READERS if r.directory)
        raise InputError(f"{path}: is a directory (give an export file, or a directory of per-rank PyTorch traces)")
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: not a regular file (a pipe or device cannot be read as a profile)")
    if st.st_size == 0:
        raise InputError(f"{path}: empty file (0 bytes)")
    head = _head(path)
    for reader in READERS:
        if reader.sniff(path, head):
            return reader.format
    if path.suffix in (".sqlite", ".db", ".sqlite3"):
        raise InputError(f"{path}: not a SQLite database (bad header): truncated, corrupt or not an export")
    raise InputError(
        f"{path}: not a recognised profile (expected an Nsight Systems SQLite export, a .nsys-rep, "
        "or a PyTorch profiler JSON trace)"
    )


def read_profile(
    path: Path | str,
    progress: Progress | None = None,
    fmt: str | None = None,
    *,
    allow_missing_ranks: bool = False,
    nsys_timeout: float | str | None = None,
) -> Profile:
    """Read any supported profile (``fmt``: the format when the caller already detected it). The user's
    file is only ever opened for reading. ``progress(rows, total)`` is called as a large table streams.

    ``allow_missing_ranks``: a per-rank trace directory with ranks that cannot be read is read
    without them (recorded in ``profile.extra["missing_ranks"]`` and its notes) instead of refused.
    ``nsys_timeout``: seconds ``nsys export`` may take on a report (default: ``KBASE_NSYS_TIMEOUT``).
    """
    path = Path(path)
    reader = READER_OF[ProfileFormat(fmt) if fmt else detect_format(path)]
    return reader.read(path, progress, ReadOptions(allow_missing_ranks=allow_missing_ranks, nsys_timeout=nsys_timeout))


def _byte_progress(path: Path, progress: Progress):
    """A position callback for the Kineto reader that reports (bytes read now, bytes in all files)."""
    try:
        files = [f for f in path.iterdir() if f.is_file()] if path.is_dir() else [path]
        total = sum(f.stat().st_size for f in files)
    except OSError:
        total = 0
    last = [0]

    def position(pos: int) -> None:
        if pos < last[0]:  # the next rank's file
            last[0] = 0
        progress(pos - last[0], total)
        last[0] = pos

    return position
