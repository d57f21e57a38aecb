"""Read an Nsight Systems report (``.nsys-rep`` / ``.qdrep``) by exporting it with ``nsys export``.

The report is copied into a private temporary folder and exported there: nsys never writes beside
the user's file. The export runs with a time limit (``KBASE_NSYS_TIMEOUT`` seconds, default
``DEFAULT_TIMEOUT_S``) in its own process group, so that on a timeout, an error or Ctrl-C the whole
group is killed before the temporary folder is removed — on every exit path.
"""

from __future__ import annotations

import math
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

from kbase.errors import InputError
from kbase.readers.profile import Profile

TIMEOUT_ENV = "KBASE_NSYS_TIMEOUT"
DEFAULT_TIMEOUT_S = 1800.0  # exporting a multi-GB report takes minutes; a hung nsys must not hang CI


def export_timeout(value: float | str | None = None) -> float:
    """Seconds ``nsys export`` may run: ``value``, else ``KBASE_NSYS_TIMEOUT``, else the default."""
    source = "timeout" if value is not None else TIMEOUT_ENV
    raw = value if value is not None else os.environ.get(TIMEOUT_ENV)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return DEFAULT_TIMEOUT_S
    try:
        seconds = float(raw)
    except ValueError:
        raise InputError(f"{source}={raw!r}: expected a number of seconds (e.g. {DEFAULT_TIMEOUT_S:g})") from None
    if not (math.isfinite(seconds) and seconds > 0):
        raise InputError(f"{source}={raw!r}: must be a positive, finite number of seconds")
    return seconds


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill nsys and anything it started, and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=10)
    except (subprocess.TimeoutExpired, OSError, ValueError):
        pass


def _export(nsys: str, report: Path, out: Path, seconds: float, label: Path) -> None:
    proc = subprocess.Popen(
        [nsys, "export", "--type", "sqlite", "--output", str(out), str(report)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        cwd=out.parent,  # anything nsys writes beside itself lands in the temporary folder
        start_new_session=True,  # its own process group: killed as one, untouched by the terminal's Ctrl-C
    )
    try:
        stdout, stderr = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise InputError(
            f"{label}: nsys export did not finish within {seconds:g} s and was stopped "
            f"(set {TIMEOUT_ENV} to allow longer)"
        ) from None
    except BaseException:  # KeyboardInterrupt included: no nsys left running on our temporary copy
        _kill_group(proc)
        raise
    if proc.returncode != 0 or not out.is_file():
        last = (stderr or stdout or "").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        raise InputError(f"{label}: nsys export failed ({last[0].strip()})")


def read_report(path: Path, progress=None, timeout: float | str | None = None) -> Profile:
    """Export ``path`` next to a temporary copy of it and read the export."""
    nsys = shutil.which("nsys")
    if nsys is None:
        raise InputError(
            f"{path}: an Nsight Systems report needs exporting and nsys is not on PATH; export it by "
            f"hand with: nsys export --type sqlite --output {path.with_suffix('.sqlite')} {path}"
        )
    seconds = export_timeout(timeout)
    from kbase.readers.nsys import read_nsys

    with tempfile.TemporaryDirectory(prefix="kbase-export-", ignore_cleanup_errors=True) as tmp:
        copy = Path(tmp) / ("report" + path.suffix)
        try:
            shutil.copyfile(path, copy)
        except OSError as exc:
            raise InputError(f"{path}: cannot copy it to a temporary folder to export it "
                             f"({exc.strerror or exc})") from None
        out = Path(tmp) / "report.sqlite"
        _export(nsys, copy, out, seconds, path)
        return read_nsys(out, progress, label=path)
