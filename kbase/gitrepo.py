"""Git facts for a baseline (gitpython): which commit, when, on which branch, and whether dirty."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from kbase.errors import InputError, UnknownRevisionError

FULL_HASH = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
ANCESTRY_LIMIT = 50


@dataclass
class CommitInfo:
    hash: str
    date: datetime | None
    branch: str  # "" when detached or unknown
    detached: bool
    dirty: bool


def open_repo(path: Path | None = None):
    where = (path or Path.cwd()).resolve()
    if not where.exists():
        raise InputError(f"--repo {where}: no such directory")
    not_a_repo = InputError(f"{where}: not a git repository (run inside one, pass --repo PATH, or use --no-git "
                            "--rev FULLHASH for a profile made elsewhere)")
    if not _may_hold_repo(where):
        raise not_a_repo  # without importing GitPython (~0.1 s): a stored diff outside a repository needs none
    import git

    try:
        return git.Repo(where, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise not_a_repo from None


def _may_hold_repo(where: Path) -> bool:
    """Whether ``where`` or a parent has ``.git`` or is a git directory itself (a bare repository), as
    GitPython's parent search looks; ``GIT_DIR`` set: always (GitPython decides)."""
    if os.environ.get("GIT_DIR"):
        return True
    for p in (where, *where.parents):
        if (p / ".git").exists() or ((p / "HEAD").is_file() and (p / "objects").is_dir()):
            return True
    return False


def refused_by_git(repo) -> None:
    """git refuses a repository owned by another user ("dubious ownership"): say so, not "no commits"."""
    import git

    try:
        repo.git.rev_parse("--git-dir")
    except git.GitCommandError as exc:
        if "dubious ownership" in str(exc.stderr) or "safe.directory" in str(exc.stderr):
            raise InputError(f"{repo.working_tree_dir}: git refuses this repository (dubious ownership: it belongs "
                             "to another user); trust it with git config --global --add safe.directory "
                             f"{repo.working_tree_dir}") from None


# Longer than any revision a person writes (git's own ref names stop at the file system's 255 bytes a part);
# past it the argument itself would be the problem (E2BIG at 128 KiB), not the revision it might name.
MAX_REVISION_CHARS = 4096


def rev_parse(repo, rev: str) -> str:
    """The full hash of the commit ``rev`` names, as git itself resolves it (``git rev-parse --verify
    --end-of-options REV``, then ``HASH^{commit}`` to peel a tag: the whole revision syntax, ``HEAD@{1.day.ago}``,
    ``main@{yesterday}``, ``@{1}``, ``:/message`` included, and nothing that could be read as an option). One
    clear line (``UnknownRevisionError``, exit 2) for every way it can name none."""
    where = f"{repo.working_tree_dir or repo.git_dir}"
    if len(rev) > MAX_REVISION_CHARS:
        raise UnknownRevisionError(f"git revision {rev[:40]!r}… of {len(rev):,} characters (at most "
                                   f"{MAX_REVISION_CHARS:,}): not a revision")
    if "\x00" in rev:
        raise UnknownRevisionError(f"unknown git revision {rev!r} in {where} (it holds a NUL character)")
    # (two steps: "REV^{commit}" at once would change what an open-ended ":/message" searches for)
    oid = _verify(where, rev)
    return oid if oid is None else _verify(where, oid + "^{commit}", shown=rev)


def _verify(where: str, rev: str, shown: str | None = None) -> str:
    import subprocess

    shown = rev if shown is None else shown
    try:
        out = subprocess.run(["git", "-C", where, "rev-parse", "--verify", "--end-of-options", rev],
                             capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        raise UnknownRevisionError(f"git revision {shown!r} cannot be resolved in {where} "
                                   f"({getattr(exc, 'strerror', None) or exc})") from None
    found = out.stdout.decode("ascii", "replace").strip().lower()
    if out.returncode == 0 and FULL_HASH.match(found):
        return found
    said = [ln.strip() for ln in out.stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
    why = next((ln.split(":", 1)[1].strip() for ln in said if ln.startswith("error:")), "")
    if "ambiguous" in why:
        raise UnknownRevisionError(f"ambiguous git revision {shown!r} in {where} ({why}): give more of the hash "
                                   "or a full ref name")
    if shown is not rev and why:  # the peel: it names an object, but no commit
        why = why.replace(rev, shown)
    raise UnknownRevisionError(f"unknown git revision {shown!r} in {where}" + (f" ({why})" if why else ""))


def resolve_commit(repo, rev: str):
    """The commit object a revision names (resolved by ``rev_parse``); one clear line when it names none."""
    import git

    try:
        commit = repo.commit(rev_parse(repo, rev))
        # Objects load lazily: in a shallow clone a parent's object may be missing, which only fails on
        # first use. Read it now, inside this try.
        commit.committed_date  # noqa: B018
        return commit
    except (UnknownRevisionError, git.BadName, git.BadObject, ValueError, git.GitCommandError,
            BrokenPipeError) as exc:
        # BrokenPipeError: git's object reader exited (a refused repository) while GitPython wrote to it
        shallow = (Path(repo.git_dir) / "shallow").exists()
        hint = (" (shallow clone: history is cut; fetch more with git fetch --deepen=N or --unshallow)"
                if shallow else "")
        refused_by_git(repo)
        if "/" not in rev and len(rev) < MAX_REVISION_CHARS and "\x00" not in rev and _is_dir(rev):
            hint += f" (a folder named {rev!r} exists here: write ./{rev} to read it as a trace directory)"
        if isinstance(exc, UnknownRevisionError):
            raise UnknownRevisionError(exc.message + hint) from None
        raise UnknownRevisionError(f"unknown git revision {rev!r} in {repo.working_tree_dir}{hint}") from None


def _is_dir(text: str) -> bool:
    try:
        return Path(text).is_dir()
    except (OSError, ValueError):
        return False


def commit_info(repo_path: Path | None = None, rev: str | None = None, no_git: bool = False) -> CommitInfo:
    if no_git:
        if not rev or not FULL_HASH.match(rev.lower()):
            raise InputError(f"--no-git needs --rev with a full commit hash (40 hex digits), got {rev!r}")
        return CommitInfo(hash=rev.lower(), date=None, branch="", detached=True, dirty=False)
    repo = open_repo(repo_path)
    if rev is None and not repo.head.is_valid():
        refused_by_git(repo)
        raise InputError(f"{repo.working_tree_dir}: the repository has no commits yet")
    commit = resolve_commit(repo, rev or "HEAD")
    detached = repo.head.is_detached
    branch = "" if detached else repo.active_branch.name
    if rev is not None and not detached and repo.head.commit.hexsha != commit.hexsha:
        branch = ""  # attributed to another commit: the current branch says nothing about it
    dirty = repo.is_dirty(untracked_files=False) if rev is None else False
    return CommitInfo(
        hash=commit.hexsha,
        date=datetime.fromtimestamp(commit.committed_date, tz=UTC),
        branch=branch,
        detached=detached,
        dirty=dirty,
    )


def first_parents(repo, start_hash: str, limit: int = ANCESTRY_LIMIT) -> list[str]:
    """``start_hash`` and its first-parent ancestors, nearest first, at most ``limit`` + 1."""
    out = []
    commit = repo.commit(start_hash)
    for _ in range(limit + 1):
        out.append(commit.hexsha)
        try:
            parents = commit.parents
        except ValueError:  # parent object missing in a shallow clone
            break
        if not parents:
            break
        commit = parents[0]
    return out


def merge_base(repo, a: str, b: str) -> str:
    bases = repo.merge_base(resolve_commit(repo, a), resolve_commit(repo, b))
    if not bases:
        raise InputError(f"no merge-base between {a!r} and {b!r}")
    return bases[0].hexsha


def author(repo_path: Path | None = None) -> str:
    try:
        repo = open_repo(repo_path)
        reader = repo.config_reader()
        name = reader.get_value("user", "name", default="")
        email = reader.get_value("user", "email", default="")
        return f"{name} <{email}>".strip() if email else str(name)
    except Exception:  # noqa: BLE001 - author is informative only
        return ""


@dataclass(frozen=True)
class CommitNote:
    """What a table says of a commit besides its hash."""

    subject: str  # the first paragraph of its message, on one line ("" when unknown)
    date: datetime | None  # committer date (UTC)


def describe_commits(repo_path: Path | None, commits: Iterable[str]) -> dict[str, CommitNote]:
    """Subject and committer date of each full commit hash the repository at ``repo_path`` (or the current
    directory's) holds; commits it does not hold (made in another clone, cut by a shallow clone) are left
    out, and so is everything outside a repository. One ``git cat-file --batch`` for all of them: no
    GitPython (~0.1 s of imports), a few milliseconds for thousands of commits."""
    where = (repo_path or Path.cwd()).resolve()
    if not where.is_dir() or not _may_hold_repo(where):  # first: outside a repository, no commit is looked at
        return {}
    wanted = [c for c in dict.fromkeys(commits) if FULL_HASH.match(c)]
    if not wanted:
        return {}
    try:
        out = subprocess.run(["git", "-C", str(where), "cat-file", "--batch"], input="\n".join(wanted).encode() + b"\n",
                             capture_output=True, timeout=120, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return {}
    notes: dict[str, CommitNote] = {}
    pos = 0
    while pos < len(out):
        end = out.find(b"\n", pos)
        if end < 0:
            break
        head = out[pos:end].split()
        pos = end + 1
        if len(head) != 3 or not head[2].isdigit():  # "<hash> missing": not in this repository
            continue
        size = int(head[2])
        body = out[pos:pos + size]
        pos += size + 1
        if head[1] == b"commit":
            notes[head[0].decode()] = _commit_note(body)
    return notes


def _commit_note(body: bytes) -> CommitNote:
    headers, _, message = body.partition(b"\n\n")
    date = None
    for line in headers.split(b"\n"):
        if line.startswith(b"committer "):
            parts = line.rsplit(b" ", 2)
            if len(parts) == 3 and parts[1].lstrip(b"-").isdigit():
                date = datetime.fromtimestamp(int(parts[1]), tz=UTC)
    paragraph = message.decode("utf-8", "replace").strip().split("\n\n", 1)[0]
    return CommitNote(subject=" ".join(line.strip() for line in paragraph.splitlines()), date=date)


def is_branch_name(repo, name: str) -> bool:
    """Whether ``name`` is a branch name as git spells one (``git check-ref-format``), not a revision
    (``main~3``, ``HEAD^``, ``@{-1}``) nor an option (``-x``)."""
    if not name or name.startswith("-") or name == "HEAD" or "@{" in name:
        return False
    out = subprocess.run(["git", "-C", str(repo.working_tree_dir or repo.git_dir), "check-ref-format",
                          f"refs/heads/{name}"], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    return out.returncode == 0


def _commit_of(repo, ref: str) -> str | None:
    out = subprocess.run(["git", "-C", str(repo.working_tree_dir or repo.git_dir), "rev-parse", "--verify", "-q",
                          "--end-of-options", f"{ref}^{{commit}}"], capture_output=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    found = out.stdout.decode("ascii", "replace").strip().lower()
    return found if out.returncode == 0 and FULL_HASH.match(found) else None


def branch_tips(repo, name: str) -> list[str]:
    """The commits a branch name points at: the local branch and ``origin``'s (or, for ``origin/main``, that
    remote-tracking branch), every one that exists: a local branch that has fallen behind its remote-tracking
    one must not hide the commits only the remote holds. Empty when none exists."""
    tips: list[str] = []
    for ref in (f"refs/heads/{name}", f"refs/remotes/origin/{name}", f"refs/remotes/{name}"):
        found = _commit_of(repo, ref)
        if found and found not in tips:
            tips.append(found)
    return tips


def commits_in_range(repo, after: str, before: str | None, wanted: Iterable[str]) -> set[str] | None:
    """Which of ``wanted`` lie in (before, after]: one ``git rev-list after ^before`` read until every wanted
    commit is seen (a gate with thousands of acceptances asked git twice per acceptance: ~3.4 ms each). None
    when git cannot list the range (a commit this clone lacks)."""
    want = {w.lower() for w in wanted}
    if not want:
        return set()
    args = ["git", "-C", str(repo.working_tree_dir or repo.git_dir), "rev-list", after]
    if before:
        args.append(f"^{before}")
    found: set[str] = set()
    with subprocess.Popen([*args, "--"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          stdin=subprocess.DEVNULL) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            c = line.decode("ascii", "replace").strip()
            if c in want:
                found.add(c)
                if len(found) == len(want):
                    proc.kill()  # every wanted commit is placed: the rest of the history is not needed
                    return found
        if proc.wait() != 0:
            return None
    return found


def is_shallow(repo) -> bool:
    """A shallow clone, or a worktree of one (its ``shallow`` file is in the common git directory: git says)."""
    out = subprocess.run(["git", "-C", str(repo.working_tree_dir or repo.git_dir), "rev-parse",
                          "--is-shallow-repository"], capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    if out.returncode == 0 and out.stdout.strip() in (b"true", b"false"):
        return out.stdout.strip() == b"true"
    common = Path(repo.common_dir) if getattr(repo, "common_dir", None) else Path(repo.git_dir)
    return (common / "shallow").exists() or (Path(repo.git_dir) / "shallow").exists()


def reachable(repo, tips: Iterable[str]) -> set[str]:
    """Every commit reachable from ``tips`` (full hashes): ``git rev-list``."""
    tips = list(tips)
    if not tips:
        return set()
    out = subprocess.run(["git", "-C", str(repo.working_tree_dir or repo.git_dir), "rev-list", *tips, "--"],
                         capture_output=True, timeout=600, stdin=subprocess.DEVNULL, check=False)
    if out.returncode:
        raise InputError(f"git rev-list failed in {repo.working_tree_dir}: "
                         f"{out.stderr.decode('utf-8', 'replace').strip()[:200]}")
    return set(out.stdout.decode("ascii", "replace").split())
