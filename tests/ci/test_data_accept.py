"""Accepting a regression with the data branch, as docs/ci.md says it, from a developer's machine.

A ``kbase-data`` branch holds what CI stored (``train-8gpu`` at two commits of ``main``, the second with
``flash_fwd`` 25% slower: its gate FAILs). A developer's own store holds experiments of three workloads.

- The old recipe (``kbase-data.sh pull`` into that store, ``kbase accept``, ``kbase-data.sh push``) is refused:
  exit 2, one line saying how many baselines the branch never had and what to do; the branch and the store are
  as they were.
- The recipe block of docs/ci.md, run as written (its ``<commit>`` filled in), pushes the acceptance and nothing
  else; a CI job that imports the branch now PASSes with the regression accepted.
- ``push --new=all`` is how to push them anyway; a CI job's own snapshot goes with ``--new=head``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.gitrepos import commit, git

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "ci" / "kbase-data.sh"
NAME = "train-8gpu"  # the workload the recipe names
RECIPE = re.compile(r"<!-- recipe: accept -->\n```bash\n(?P<body>.*?)```", re.S)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KBASE_", "GITHUB_", "CI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return {**env, **extra}


def _sh(cwd: Path, script: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-ec", script], cwd=cwd, env=_env(**env), capture_output=True, text=True,
                          timeout=300)


def _export(path: Path, slow: float, seed: int) -> Path:
    from kbase.synth.generate import ExportSpec, generate_export
    from kbase.synth.names import default_kernel_mix

    flash = next(k.name for k in default_kernel_mix() if k.short_name == "flash_fwd_kernel")
    generate_export(path, ExportSpec(n_gpus=2, iterations=8, seed=seed), overwrite=True, slowdown={flash: slow})
    return path


def _branch_files(origin: Path) -> list[str]:
    return sorted(git(origin, "ls-tree", "-r", "--name-only", "kbase-data").splitlines())


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("accept")
    origin = root / "origin.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(origin))
    ci = root / "ci"
    git(root, "clone", "-q", f"file://{origin}", str(ci))
    git(ci, "checkout", "-q", "-b", "main")
    (ci / "ci").mkdir()
    (ci / "ci" / "kbase-data.sh").write_bytes(SCRIPT.read_bytes())
    git(ci, "add", "ci")
    exports = root / "exports"
    exports.mkdir()
    commits = []
    for i, slow in enumerate((1.0, 1.25)):  # what CI stores: each job pulls, snapshots its commit, pushes
        commits.append(commit(ci, f"model = build({i})\n", f"train: step {i}"))
        git(ci, "push", "-q", "origin", "main")
        r = _sh(ci, f"bash ci/kbase-data.sh pull\nkbase snapshot {_export(exports / f'c{i}.sqlite', slow, 10 + i)} "
                    f"--name {NAME} --quiet\nbash ci/kbase-data.sh push --new=head",
                KBASE_DB=f"sqlite:///{root / f'job{i}.db'}")
        assert r.returncode == 0 and "pushed to kbase-data" in r.stderr, r.stderr
    dev = root / "dev"
    git(root, "clone", "-q", f"file://{origin}", str(dev))
    store = root / "dev-store.db"
    for workload, rev in ((NAME, commits[1]), ("exp-a", commits[0]), ("exp-b", commits[1])):
        r = _sh(dev, f"kbase snapshot {_export(exports / f'{workload}.sqlite', 1.1, 30 + len(workload))} "
                     f"--name {workload} --rev {rev} --quiet", KBASE_DB=f"sqlite:///{store}")
        assert r.returncode == 0, r.stderr
    return {"root": root, "origin": origin, "dev": dev, "store": store, "commits": commits}


def _ci_gate(world: dict, name: str) -> subprocess.CompletedProcess:
    """What the next CI job sees: the data branch imported into a fresh store, the pair gated."""
    check = world["root"] / name
    git(world["root"], "clone", "-q", "--branch", "kbase-data", f"file://{world['origin']}", str(check))
    c1, c2 = world["commits"]
    return _sh(world["dev"], f"kbase import {check / 'baselines'} --quiet\nkbase gate {c1} {c2} --name {NAME}",
               KBASE_DB=f"sqlite:///{world['root'] / (name + '.db')}")


def test_the_old_recipe_is_refused_and_the_docs_recipe_pushes_the_acceptance_alone(world):
    dev, origin, store = world["dev"], world["origin"], world["store"]
    c2 = world["commits"][1]
    before = _branch_files(origin)
    tip = git(origin, "rev-parse", "kbase-data")
    assert _ci_gate(world, "gate-before").returncode == 1  # flash_fwd +25%: FAIL until accepted

    # the old recipe, in the developer's own store: the experiments of three workloads would go with it
    old = _sh(dev, f"bash ci/kbase-data.sh pull\nkbase accept '*flash_fwd*' --name {NAME} --rev {c2} "
                   "--reason 'known' --expires 2099-01-01", KBASE_DB=f"sqlite:///{store}")
    assert old.returncode == 0, old.stderr
    stored = store.read_bytes()
    refused = _sh(dev, "bash ci/kbase-data.sh push", KBASE_DB=f"sqlite:///{store}")
    assert refused.returncode == 2, refused.stderr
    line = refused.stderr.strip().splitlines()[-1]
    assert "refusing to push 3 baseline(s) the data branch never had" in line and "scratch store" in line, line
    assert "KBASE_DATA_NEW=head" in line and "Traceback" not in refused.stderr
    assert git(origin, "rev-parse", "kbase-data") == tip and store.read_bytes() == stored

    # docs/ci.md's recipe, as written: a scratch store, the acceptance and nothing else
    block = RECIPE.search((REPO / "docs" / "ci.md").read_text(encoding="utf-8"))
    assert block is not None, "docs/ci.md lost its accept recipe block"
    assert "<commit>" in block["body"] and f"--name {NAME}" in block["body"]
    r = _sh(dev, block["body"].replace("<commit>", c2))
    assert r.returncode == 0 and "pushed to kbase-data" in r.stderr, r.stdout + r.stderr
    added = sorted(set(_branch_files(origin)) - set(before))
    assert len(added) == 1 and added[0].endswith(".acceptance"), added
    assert not set(before) - set(_branch_files(origin))  # nothing taken away either

    passed = _ci_gate(world, "gate-after")
    assert passed.returncode == 0 and "accepted" in passed.stdout + passed.stderr, passed.stdout + passed.stderr


def test_told_to_it_pushes_the_new_baselines(world):
    """``push --new=all`` (or KBASE_DATA_NEW=all): a person's decision, said on the command line."""
    dev, origin = world["dev"], world["origin"]
    before = _branch_files(origin)
    bad = _sh(dev, "bash ci/kbase-data.sh push", KBASE_DB=f"sqlite:///{world['store']}", KBASE_DATA_NEW="some")
    assert bad.returncode == 2 and "KBASE_DATA_NEW='some' must be none, head or all" in bad.stderr
    r = _sh(dev, "bash ci/kbase-data.sh pull\nbash ci/kbase-data.sh push --new=all",
            KBASE_DB=f"sqlite:///{world['store']}")
    assert r.returncode == 0 and "pushed to kbase-data" in r.stderr, r.stderr
    added = [f for f in set(_branch_files(origin)) - set(before) if f.endswith(".baseline")]
    assert len(added) == 3, added
