"""``kbase bisect``'s hands: check a commit out in a worktree of its own, run the user's capture command there
with a timeout, and leave nothing behind. The user's working tree, index and stash are never touched: ``git
worktree add --detach`` writes only the new folder and its entry under ``.git/worktrees``, which ``remove``
takes away again, on success, failure, timeout and Ctrl-C alike."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kbase.errors import InputError

OUT = "{out}"
# What profilers add to the name they are given: ``nsys profile -o {out}`` writes {out}.nsys-rep (and
# {out}.sqlite with ``--export sqlite``, read first: no nsys needed to read it).
WRITTEN_SUFFIXES = (".sqlite", ".nsys-rep", ".json", ".json.gz", ".pt.trace.json", ".pt.trace.json.gz")
LOG_TAIL = 300  # characters of the command's output a skipped midpoint quotes


@dataclass(frozen=True)
class CaptureRun:
    """One execution of CMD at one commit: the profile it wrote (None: it failed, ``why`` says how)."""

    commit: str
    profile: Path | None
    why: str = ""


def check_command(cmd: str) -> None:
    if not cmd.strip():
        raise InputError("the capture command is empty", field="run", value=cmd)
    if OUT not in cmd:
        raise InputError("the capture command must name {out}, the path kbase reads the profile from",
                         field="run", value=cmd)


def command_for(cmd: str, out: Path) -> str:
    """CMD with ``{out}`` replaced by the profile's path, quoted for the shell."""
    return cmd.replace(OUT, shlex.quote(str(out)))


def _git(repo_dir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo_dir), *args], capture_output=True, timeout=600,
                          stdin=subprocess.DEVNULL, check=False)


@contextlib.contextmanager
def worktree(repo_dir: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of ``commit`` in a temporary folder, removed on the way out (whatever happened)."""
    parent = Path(tempfile.mkdtemp(prefix="kbase-bisect-"))
    where = parent / commit[:12]
    try:
        made = _git(repo_dir, "worktree", "add", "--detach", "--quiet", str(where), commit)
        if made.returncode:
            raise InputError(f"git worktree add failed for {commit[:12]} in {repo_dir}: "
                             f"{made.stderr.decode('utf-8', 'replace').strip()[:200]}")
        yield where
    finally:
        with contextlib.suppress(Exception):  # still removed below, and pruned from git's list
            _git(repo_dir, "worktree", "remove", "--force", str(where))
        shutil.rmtree(parent, ignore_errors=True)
        with contextlib.suppress(Exception):
            _git(repo_dir, "worktree", "prune")


def _stop(proc: subprocess.Popen) -> None:
    """End CMD and everything it started (its own process group)."""
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run_capture(repo_dir: Path, commit: str, cmd: str, out_dir: Path, attempt: int, timeout_s: float) -> CaptureRun:
    """Check ``commit`` out in its own worktree and run CMD there (``{out}``: a fresh path under ``out_dir``).
    A non-zero exit, a timeout or no profile written: a failed run, ``why`` quoting the end of its output."""
    out = out_dir / f"{commit[:12]}-{attempt}"
    with worktree(repo_dir, commit) as where:
        env = {**os.environ, "KBASE_BISECT_COMMIT": commit, "KBASE_BISECT_OUT": str(out)}
        env.pop("GIT_DIR", None)
        env.pop("GIT_INDEX_FILE", None)  # CMD's git sees its worktree, never the user's index
        log = out_dir / f"{commit[:12]}-{attempt}.log"
        with open(log, "wb") as sink:
            proc = subprocess.Popen(command_for(cmd, out), shell=True, cwd=where, env=env, stdout=sink,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _stop(proc)
                return CaptureRun(commit, None, f"timed out after {timeout_s:g} s")
            except BaseException:  # Ctrl-C: the command goes too, then the worktree
                _stop(proc)
                raise
        tail = log.read_bytes()[-LOG_TAIL:].decode("utf-8", "replace").strip().replace("\n", " | ")
        if rc:
            return CaptureRun(commit, None, f"exit {rc}" + (f": {tail}" if tail else ""))
        written = next((p for p in (out, *(out.with_name(out.name + s) for s in WRITTEN_SUFFIXES)) if p.exists()),
                       None)
        if written is None:
            return CaptureRun(commit, None, "it exited 0 but wrote no profile at {out}")
        return CaptureRun(commit, written)
