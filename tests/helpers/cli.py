"""Running the ``kbase`` command line from a test: exit code, stdout and stderr.

By default the CLI entry point (``kbase.cli.main``) runs in this process — a fresh interpreter per call costs
over a second of pandas import, too slow for the many cases — with ``sys.argv``, stdout, stderr and warnings
redirected as a subprocess would see them. ``subprocess=True`` (or the environment variable
``KBASE_TEST_SUBPROCESS=1`` for every call) runs ``python -m kbase.cli`` in a real child process instead.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess as _subprocess
import sys
import warnings
from dataclasses import dataclass

from helpers.shared import REPO


@dataclass
class CliResult:
    rc: int
    stdout: str
    stderr: str
    args: list[str]

    def __str__(self) -> str:  # shown by pytest on a failed assertion
        return (f"kbase {' '.join(self.args)} -> rc={self.rc}\nstdout: {self.stdout[:2000]}\n"
                f"stderr: {self.stderr}")


def _want_subprocess(flag: bool | None) -> bool:
    if os.environ.get("KBASE_TEST_SUBPROCESS", "") not in ("", "0"):
        return True
    return bool(flag)


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("KBASE_DEBUG", None)  # the one-line error contract is what is under test
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("COLUMNS", "200")
    return env


def _run_subprocess(args: list[str], timeout: float) -> CliResult:
    proc = _subprocess.run(
        [sys.executable, "-m", "kbase.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=_child_env(),
        timeout=timeout,
        stdin=_subprocess.DEVNULL,
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr, args)


def _run_inprocess(args: list[str]) -> CliResult:
    from kbase import cli

    out, err = io.StringIO(), io.StringIO()

    def to_stderr(message, category, filename, lineno, file=None, line=None):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    saved_argv = sys.argv
    saved_debug = os.environ.pop("KBASE_DEBUG", None)
    rc: int | None = None
    sys.argv = ["kbase", *args]
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            # As in a fresh interpreter: warnings are printed on stderr (pytest would record them).
            warnings.resetwarnings()
            warnings.simplefilter("default")
            warnings.showwarning = to_stderr
            try:
                cli.main()
            except SystemExit as exc:
                code = exc.code
                if code is None:
                    rc = 0
                elif isinstance(code, int):
                    rc = code
                else:  # sys.exit("message"): printed on stderr, status 1
                    err.write(f"{code}\n")
                    rc = 1
    finally:
        sys.argv = saved_argv
        if saved_debug is not None:
            os.environ["KBASE_DEBUG"] = saved_debug
    if rc is None:  # main() must always leave through sys.exit
        rc = -1
    return CliResult(rc, out.getvalue(), err.getvalue(), args)


def run_kbase(*args, subprocess: bool | None = None, timeout: float = 120) -> CliResult:
    """Run ``kbase ARGS…`` and return (rc, stdout, stderr)."""
    argv = [str(a) for a in args]
    if _want_subprocess(subprocess):
        return _run_subprocess(argv, timeout)
    return _run_inprocess(argv)


_PG_CALLS = [0]


def kb(*args):
    """run_kbase, collecting garbage every few PostgreSQL calls: pooled connections of earlier
    in-process commands are released before their warnings can land in a later command's stderr."""
    if any(str(a).startswith("postgresql") for a in args):
        _PG_CALLS[0] += 1
        if _PG_CALLS[0] % 5 == 0:
            import gc

            gc.collect()
    return run_kbase(*args)


def kbase_script(*args: object, cwd, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``python -m kbase.cli ARGS`` run as the ``kbase`` script runs: a fresh
    process in ``cwd``, none of the caller's ``KBASE_`` / ``GITHUB_`` variables, 200 columns, ``env`` on top (the
    pre-Typer answers' tests: ``KBASE_NO_FAST_*=1`` for the command line's own path)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KBASE_", "GITHUB_"))}
    base |= {"COLUMNS": "200", "PYTHONPATH": str(REPO), **(env or {})}
    p = _subprocess.run([sys.executable, "-m", "kbase.cli", *map(str, args)], cwd=cwd, env=base, capture_output=True,
                        text=True, timeout=120, stdin=_subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr
