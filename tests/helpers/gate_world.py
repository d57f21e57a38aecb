"""The gate tests' world: a temporary git repository (``c0``..``c4`` on ``main``, ``f1`` on ``feature``), generated
exports (``GATE_RECIPES``) and the scenarios' baselines at its commits (``SCENARIOS``), snapshotted once per
database by ``World.ensure``; ``_kbase`` runs the CLI in this process, collecting PostgreSQL connections' garbage
first where stderr must be one line."""

from __future__ import annotations

import gc
import json
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from helpers.cli import run_kbase
from helpers.diff_exports import SLOW, Exports
from helpers.shared import REPO

REPO_ROOT = REPO


_PG_USED: list[bool] = []


def _kbase(*args, strict: bool = False) -> CliResult:  # noqa: F821
    if strict and _PG_USED:
        gc.collect()
    return run_kbase(*args)


def _compute_kernel_names() -> list[str]:
    from kbase.analysis.classify import category
    from kbase.synth.generate import default_kernel_mix

    return [k.name for k in default_kernel_mix() if category(k.name) == "compute"]


GATE_RECIPES: dict[str, dict] = {
    "base": dict(seed=1),
    "same": dict(seed=2),
    "seed3": dict(seed=3),
    "slow": dict(seed=2, slowdown={SLOW.name: 1.10}),
    # SLOW 10% faster per launch: main moved on after the feature branched off
    "faster": dict(seed=3, slowdown={SLOW.name: 0.90}),
    # every compute kernel +5% per launch: each under a 10% per-kernel threshold, the kernel total
    # (compute is ~76% of kernel time) about +3.8%, over the 3% total threshold
    "total": dict(seed=2, slowdown={n: 1.05 for n in _compute_kernel_names()}),
    "one_gpu": dict(seed=2, n_gpus=1),
    "fewer": dict(seed=2, iterations=4),  # 3 iterations used vs 7
}


# scenario -> [(commit key, export key, extra snapshot args)]
SCENARIOS: dict[str, list[tuple[str, str, tuple[str, ...]]]] = {
    "pass": [("c1", "base", ()), ("c2", "same", ())],
    "slow": [("c1", "base", ()), ("c2", "slow", ())],
    "accept": [("c1", "base", ()), ("c2", "slow", ())],
    "accept_cfg": [("c1", "base", ()), ("c2", "slow", ())],
    "total": [("c1", "base", ()), ("c2", "total", ())],
    "gpus": [("c1", "base", ()), ("c2", "one_gpu", ())],
    "window": [("c1", "base", ("--warmup", "2")), ("c2", "same", ())],
    "fewer": [("c1", "base", ()), ("c2", "fewer", ())],
    "head": [("c3", "base", ()), ("c4", "slow", ())],
    "branch": [("c2", "base", ()), ("c4", "faster", ()), ("f1", "seed3", ())],
    "pool": [("c1", "base", ()), ("c1", "same", ())],
}


@dataclass
class World:
    repo: Path
    commits: dict[str, str]
    exports: Exports
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    done: dict = field(default_factory=dict)  # (db url, scenario) -> {commit key: [baseline ids]}

    def workload(self, scenario: str) -> str:
        return f"{scenario}-{self.run_id}"

    def ensure(self, db: str, scenario: str) -> dict[str, list[int]]:
        """Snapshot the scenario's exports (once per database) with ``kbase snapshot``."""
        key = (db, scenario)
        if key not in self.done:
            ids: dict[str, list[int]] = {}
            for commit, export, extra in SCENARIOS[scenario]:
                r = _kbase("snapshot", self.exports.path(export), "--db", db, "--repo", self.repo,
                              "--name", self.workload(scenario), "--rev", self.commits[commit],
                              "--format", "json", "--limit", "1", *extra)
                assert r.rc == 0, r
                doc = json.loads(r.stdout)
                assert doc["created"] and doc["commit"] == self.commits[commit]
                ids.setdefault(commit, []).append(doc["baseline_id"])
            self.done[key] = ids
        return self.done[key]

    def kbase(self, db: str, scenario: str, *args, strict: bool = False) -> CliResult:  # noqa: F821
        self.ensure(db, scenario)
        return _kbase(*args, "--db", db, "--repo", self.repo, "--name", self.workload(scenario),
                      strict=strict)


def _git_commit(repo, path: Path, text: str, message: str) -> str:
    import git

    path.write_text(text)
    repo.index.add([path.name])
    actor = git.Actor("kbase test", "test@kbase.invalid")
    return repo.index.commit(message, author=actor, committer=actor).hexsha


def _one_line_error(r) -> None:
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("kbase: error:"), r
    assert "Traceback" not in r.stderr


def _json(r) -> dict:
    return json.loads(r.stdout)
