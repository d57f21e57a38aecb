"""Stage 1 — read a profile: detect the format from the file's content and hand it to its reader."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from collections.abc import Callable

from kbase.errors import InputError
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


def detect_format(path: Path) -> str:
    """'nsys-sqlite', 'nsys-rep' or 'kineto'; a clear error for anything else."""
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        from kbase.readers.kineto import looks_like_kineto

        if any(looks_like_kineto(p) for p in sorted(path.iterdir()) if p.is_file()):
            return "kineto"
        raise InputError(f"{path}: is a directory (give an export file, or a directory of per-rank PyTorch traces)")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: empty file (0 bytes)")
    head = _head(path)
    if head.startswith(SQLITE_MAGIC):
        return "nsys-sqlite"
    if path.suffix in NSYS_REPORT_SUFFIXES:
        return "nsys-rep"
    from kbase.readers.kineto import looks_like_kineto

    if looks_like_kineto(path):
        return "kineto"
    if path.suffix in (".sqlite", ".db", ".sqlite3"):
        raise InputError(f"{path}: not a SQLite database (bad header): truncated, corrupt or not an export")
    raise InputError(
        f"{path}: not a recognised profile (expected an Nsight Systems SQLite export, a .nsys-rep, "
        "or a PyTorch profiler JSON trace)"
    )


def read_profile(path: Path | str, progress: Progress | None = None, fmt: str | None = None) -> Profile:
    """Read any supported profile (``fmt``: the format when the caller already detected it). The user's
    file is only ever opened for reading. ``progress(rows, total)`` is called as a large table streams."""
    path = Path(path)
    fmt = fmt or detect_format(path)
    if fmt == "nsys-sqlite":
        from kbase.readers.nsys import read_nsys

        return read_nsys(path, progress)
    if fmt == "nsys-rep":
        return _read_report(path, progress)
    from kbase.readers.kineto import read_kineto

    return read_kineto(path)


def _read_report(path: Path, progress) -> Profile:
    """Export a .nsys-rep with the nsys CLI next to a temporary copy, never beside the user's file."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise InputError(
            f"{path}: an Nsight Systems report needs exporting and nsys is not on PATH; export it by "
            f"hand with: nsys export --type sqlite --output {path.with_suffix('.sqlite')} {path}"
        )
    from kbase.readers.nsys import read_nsys

    with tempfile.TemporaryDirectory(prefix="kbase-export-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        out = copy.with_suffix(".sqlite")
        proc = subprocess.run(
            [nsys, "export", "--type", "sqlite", "--output", str(out), str(copy)],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0 or not out.exists():
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            raise InputError(f"{path}: nsys export failed ({last[0]})")
        profile = read_nsys(out, progress)
        profile.source = path
        return profile
