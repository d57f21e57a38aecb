"""Generated exports for the diff and gate tests, with known answers, and their diff sides.

Every case compares two captures made with different seeds (seed=1 before, seed=2 after), so the per-launch
jitter differs between the sides as it does between two real runs; only the knob under test (``slowdown``,
``extra_launches``, ``add``/``drop``/``rename``) changes the workload. Exports are small (2 GPUs, 8 iterations:
7 used after the default warm-up skip), generated on first use under a file lock, once per session.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from dataclasses import replace
from pathlib import Path

import kbase
from kbase.comparison.diff import compute_diff
from kbase.comparison.side import side_from_leaderboards
from kbase.synth.generate import ExportSpec, KernelSpec, default_kernel_mix, generate_export

MIX = {k.short_name if k.short_name != "vectorized_elementwise_kernel" else k.name: k
       for k in default_kernel_mix()}
SLOW = MIX["flash_fwd_kernel"]  # ~7.6% of the iteration, 12 launches per iteration
# ~4.5% of the iteration, 12 launches per iteration
SHORT_SLOW = next(k for k in default_kernel_mix() if k.name.startswith("sm90_xmma_gemm"))
GONE = MIX["softmax_warp_forward"]
RENAMED = next(k for k in default_kernel_mix() if k.short_name == "Kernel2")
RENAMED_TO = RENAMED.name.replace("128x128x64_2x1x1", "128x256x64_1x2x1")
NEW = KernelSpec("triton_poi_fused_add_mul_kbase_new_0", "triton_poi_fused_add_mul_kbase_new_0", 52_000, 10)
EXTRA = 6  # extra launches per iteration of SLOW

BASE = ExportSpec(n_gpus=2, iterations=8)
RECIPES: dict[str, dict] = {
    "base": dict(seed=1),
    "same": dict(seed=2),
    "slow": dict(seed=2, slowdown={SLOW.name: 1.10}),
    "more": dict(seed=2, extra_launches={SLOW.name: EXTRA}),
    "churn": dict(seed=2, add=[NEW], drop={GONE.name}, rename={RENAMED.name: RENAMED_TO}),
    # 7 iterations, warm-up 1 skipped: 6 per GPU used
    "short_base": dict(seed=1, iterations=7),
    "short_slow": dict(seed=2, iterations=7, slowdown={SHORT_SLOW.name: 1.15}),
    **{f"seed{s}": dict(seed=s) for s in range(3, 7)},
}
SEED_PAIRS = [("base", "same"), ("same", "seed3"), ("seed3", "seed4"), ("seed4", "seed5"), ("seed5", "seed6")]

# The default mix has 2% per-launch jitter: per-iteration sums wobble well under 1%. Real small
# kernels wobble more; this mix gives every kernel under ~2% of the iteration 12% per-launch jitter,
# so between two seeds such kernels move by about 1-3% per iteration.
NOISY_MIX = [replace(k, jitter=0.12) if k.mean_ns * k.launches_per_iter < 1_200_000 else k
             for k in default_kernel_mix()]
RECIPES.update({f"noisy{s}": dict(seed=s, kernels=NOISY_MIX) for s in range(1, 7)})
NOISY_PAIRS = [(f"noisy{s}", f"noisy{s + 1}") for s in range(1, 6)]


class Exports:
    """Generated exports (from ``recipes``: key -> ExportSpec overrides of ``BASE``) and their diff
    sides, made on first use. A file's name carries a digest of its full spec, so modules sharing
    the folder can never pick up another recipe's file under the same key."""

    def __init__(self, root: Path, recipes: dict[str, dict] | None = None):
        self.root = root
        self.recipes = RECIPES if recipes is None else recipes
        self._sides: dict = {}

    def spec(self, key: str) -> ExportSpec:
        return replace(BASE, **self.recipes[key])

    def path(self, key: str) -> Path:
        spec = self.spec(key)
        p = self.root / f"{key}-{hashlib.sha1(repr(spec).encode()).hexdigest()[:12]}.sqlite"
        if not p.exists():
            with open(p.with_suffix(".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not p.exists():  # generate_export writes NAME.partial, then renames
                    generate_export(p, spec)
        return p

    def side(self, key: str):
        if key not in self._sides:
            self._sides[key] = side_from_leaderboards([kbase.top(self.path(key), sketches=True)], key)
        return self._sides[key]

    def diff(self, before: str, after: str, policy=None):
        return compute_diff(self.side(before), self.side(after), policy)


def shared_export_dir(tmp_path_factory) -> Path:
    """One folder for the generated exports of the whole session: pytest-xdist workers share the
    parent of their base temp dirs, so each export is generated once (under a file lock), not once
    per worker."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "kbase_generated_exports"
    root.mkdir(exist_ok=True)
    return root
