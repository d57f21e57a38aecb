"""What ``prune`` promises to keep, as one set of rules that ``prune`` and ``import`` (a tombstone from the data
branch is a deletion too) both obey: a baseline whose commit is in the history of a kept branch, one stored on
a kept branch, and one that an acceptance needs (the baselines at its commit and the nearest stored first-parent
ancestor's: the gate's two sides).

A kept branch is a branch name (never a revision such as ``main~3``), resolved to its local branch and its
remote-tracking one both: a stale local ``main`` must not hide the commits only ``origin/main`` holds."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kbase.errors import InputError


@dataclass(frozen=True)
class Accepted:
    """An acceptance as the keep rules read it: its workload, commit and how a listing names it."""

    workload: str
    commit: str
    label: str


@dataclass
class KeepRules:
    """The kept branches (name -> the tips it resolved to), their whole history, and why each baseline an
    acceptance needs is kept (by (workload, commit))."""

    tips: dict[str, list[str]]
    history: set[str]
    needed: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def names(self) -> set[str]:
        """The names a baseline's recorded branch may carry for "stored on a kept branch": ``origin/main``
        kept keeps what was stored on ``main``, and the other way round."""
        out = set()
        for name in self.tips:
            out |= {name, name.removeprefix("origin/"), f"origin/{name}"}
        return out

    def why_kept(self, workload: str, commit: str, branch: str) -> str | None:
        """Why a baseline (its workload, commit and recorded branch) is kept, or None."""
        if commit in self.history:
            return f"in the history of {', '.join(self.tips)}"
        if branch and branch in self.names:
            return f"stored on {branch}"
        return self.needed.get((workload, commit))

    def need(self, acceptances: Iterable[Accepted], stored: Sequence[tuple[str, str]], repo: Any) -> None:
        """Record what ``acceptances`` (each with ``workload``, ``commit`` and ``label``) need among the
        ``stored`` (workload, commit) pairs: the baselines at the accepted commit and the nearest stored
        first-parent ancestor's."""
        from kbase.gitrepo import first_parents

        have = set(stored)
        for a in acceptances:
            self.needed.setdefault((a.workload, a.commit), f"{a.label} is at its commit")
            try:
                line = first_parents(repo, a.commit)[1:]
            except Exception:  # noqa: BLE001 - a commit this clone does not hold: its own baselines are kept above
                continue
            for c in line:
                if (a.workload, c) in have:
                    self.needed.setdefault((a.workload, c), f"the base of {a.label}")
                    break


def keep_rules(repo: Any, branches: list[str]) -> KeepRules:
    """The rules of ``branches`` in ``repo``: each must be a branch name that exists (locally or on ``origin``),
    and the clone must hold the whole history (a shallow clone, or a worktree of one, would make kept commits
    look unreachable). Otherwise ``InputError``, before anything is read."""
    from kbase.gitrepo import branch_tips, is_branch_name, is_shallow, reachable

    if is_shallow(repo):
        raise InputError(f"{repo.working_tree_dir}: a shallow clone; prune needs the whole history to know what a "
                         "kept branch needs (git fetch --unshallow, or fetch-depth: 0)")
    tips: dict[str, list[str]] = {}
    for name in branches:
        if not is_branch_name(repo, name):
            raise InputError("is not a branch name (a branch is kept by its name: main, release/1.2; not a revision "
                             "such as main~3)", field="keep_branch", value=name)
        found = branch_tips(repo, name)
        if not found:
            raise InputError(f"no branch {name!r} (nor origin/{name}) in {repo.working_tree_dir}",
                             field="keep_branch", value=name)
        tips[name] = found
    return KeepRules(tips, reachable(repo, [t for ts in tips.values() for t in ts]))


def default_branches(repo: Any) -> list[str]:
    """The branch ``import`` keeps when none is named: ``origin``'s default branch (``origin/HEAD``), else
    ``main`` or ``master``, whichever exists; none when the clone has neither."""
    import subprocess

    from kbase.gitrepo import branch_tips

    where = str(repo.working_tree_dir or repo.git_dir)
    out = subprocess.run(["git", "-C", where, "symbolic-ref", "-q", "--short", "refs/remotes/origin/HEAD"],
                         capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    head = out.stdout.decode("utf-8", "replace").strip().removeprefix("origin/")
    if out.returncode == 0 and head:
        return [head]
    return [name for name in ("main", "master") if branch_tips(repo, name)][:1]
