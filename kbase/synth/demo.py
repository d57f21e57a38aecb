"""The built-in demo: no GPU, no profile of your own.

It makes a throwaway git repository with two commits, generates a realistic two-GPU Nsight
Systems export for each (the second with one GEMM made 25% slower per launch), stores a baseline
at each commit, then diffs HEAD~1 against HEAD and runs the gate, which must fail on that kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kbase.synth.generate import ExportSpec, default_kernel_mix, generate_export

SLOWED_FAMILY = "sm90_xmma_gemm"
SLOWDOWN = 1.25  # ~1.1% of the iteration: well over the gate's min_effect_pct (0.5%)


@dataclass
class DemoRun:
    root: Path
    repo: Path
    db_url: str
    before_export: Path
    after_export: Path
    slowed_kernel: str


def _commit(repo, path: Path, text: str, message: str) -> str:
    path.write_text(text)
    repo.index.add([str(path)])
    actor = __import__("git").Actor("kbase demo", "demo@kbase.invalid")
    return repo.index.commit(message, author=actor, committer=actor).hexsha


def prepare(root: Path, iterations: int = 12, n_gpus: int = 2) -> DemoRun:
    """Create the repository, both exports and the store location (no baseline stored yet)."""
    import git

    root = root.resolve()  # GitPython reads index paths relative to the work tree, not the cwd
    root.mkdir(parents=True, exist_ok=True)
    repo_dir = root / "repo"
    repo = git.Repo.init(repo_dir, initial_branch="main")
    slowed = next(k.name for k in default_kernel_mix() if k.name.startswith(SLOWED_FAMILY))
    spec = ExportSpec(n_gpus=n_gpus, iterations=iterations, seed=1)
    before = root / "train_v1.sqlite"
    after = root / "train_v2.sqlite"
    generate_export(before, spec, overwrite=True)
    generate_export(after, spec, overwrite=True, seed=2, slowdown={slowed: SLOWDOWN})
    _commit(repo, repo_dir / "train.py", "model = build(fused_attention=True)\n", "train: baseline model")
    return DemoRun(root=root, repo=repo_dir, db_url=f"sqlite:///{root / 'kbase.db'}", before_export=before,
                   after_export=after, slowed_kernel=slowed)


def second_commit(run: DemoRun) -> str:
    import git

    repo = git.Repo(run.repo)
    return _commit(repo, run.repo / "train.py", "model = build(fused_attention=True, gemm_tile='128x256')\n",
                   "train: switch GEMM tile config")
