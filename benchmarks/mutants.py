"""Planted mutations of kbase's documented rules, and whether the tests catch each: a test suite that passes with
a rule broken does not hold that rule.

    python benchmarks/mutants.py [--only NAME,...] [--list]

Each mutant is one textual edit of one module (``MUTANTS``: the rule family, the file, the text and its
replacement, the tests that should catch it). For each, the repository is copied (without ``.venv`` and
caches), the edit applied (the script stops if the text is not found: a rule moved, update the mutant), and
the tests run against the copy (``PYTHONPATH``: the copy's ``kbase`` first). Caught: the tests fail. Prints one
line per mutant and exits 1 when any survives.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    family: str
    path: str
    old: str
    new: str
    tests: tuple[str, ...]


KEEP = ("tests/test_rule_tables.py", "tests/cli/test_keep_rules.py")
GATE = ("tests/test_rule_tables.py::test_gate_policy", "tests/test_rule_tables.py::test_gate_policy_cannot_judge")
MUTANTS = [
    # prune keep rules (docs/cli.md#kbase-prune, docs/export-format.md)
    Mutant("prune-first-parent-only", "prune keep rules", "kbase/gitrepo.py",
           '"rev-list", *tips, "--"]', '"rev-list", "--first-parent", *tips, "--"]', KEEP),
    Mutant("prune-drops-kept-branch-rule", "prune keep rules", "kbase/api/keep_rules.py",
           "if branch and branch in self.names:", "if False:", KEEP),
    Mutant("prune-drops-acceptance-base", "prune keep rules", "kbase/api/keep_rules.py",
           'self.needed.setdefault((a.workload, c), f"the base of {a.label}")', "pass", KEEP),
    Mutant("prune-trusts-the-local-branch", "prune keep rules", "kbase/gitrepo.py",
           'for ref in (f"refs/heads/{name}", f"refs/remotes/origin/{name}", f"refs/remotes/{name}"):',
           'for ref in (f"refs/heads/{name}",):', KEEP),
    # tensor-core rules (docs/kernel-classification.md)
    Mutant("tc-half-gemm-on-cuda-cores", "tensor-core rules", "kbase/analysis/classify.py",
           'TcRule(_r(r"(?:fp16|f16|half).*(?:sgemm|scudnn)|hgemm"), TC_FALLBACK,',
           'TcRule(_r(r"(?:fp16|f16|half).*(?:sgemm|scudnn)|hgemm"), TC_YES,', ("tests/test_rule_tables.py",)),
    Mutant("tc-nvjet-not-tensor-cores", "tensor-core rules", "kbase/analysis/classify.py",
           'TcRule(_r(r"^nvjet"), TC_YES,', 'TcRule(_r(r"^nvjet"), TC_NA,', ("tests/test_rule_tables.py",)),
    # the export content digest (docs/export-format.md)
    Mutant("digest-without-names", "export digest", "kbase/store/transfer/export_files.py",
           "    h.update(_json(names))\n", "", ("tests/test_rule_tables.py",)),
    Mutant("digest-without-gpu-count", "export digest", "kbase/store/transfer/export_files.py",
           'BOOKKEEPING = frozenset({"created_at",', 'BOOKKEEPING = frozenset({"gpu_count", "created_at",',
           ("tests/test_rule_tables.py",)),
    # windowing and warm-up (docs/leaderboard.md)
    Mutant("warmup-off-by-one", "windowing", "kbase/analysis/window.py",
           "default = DEFAULT_WARMUP if len(keys) >= DEFAULT_WARMUP + 2 else 0",
           "default = DEFAULT_WARMUP if len(keys) >= DEFAULT_WARMUP + 1 else 0", ("tests/test_rule_tables.py",)),
    Mutant("warmup-skips-one-more", "windowing", "kbase/analysis/window.py",
           "chosen = keys[skipped:]", "chosen = keys[skipped + 1:]", ("tests/test_rule_tables.py",)),
    # the gate's policy (docs/diff.md, docs/noise-model.md, docs/budget.md, docs/cli.md "kbase gate"): its rule table
    Mutant("gate-ignores-acceptances", "gate policy", "kbase/comparison/gate.py",
           "    acc = acceptances.first(names)\n", "    acc = None\n",
           ("tests/comparison/test_gate_exit_codes.py", "tests/comparison/test_gate_policy_ancestry_reports.py",
            "tests/comparison/test_acceptance_index.py", *GATE)),
    Mutant("gate-no-min-effect-floor", "gate policy", "kbase/comparison/noise.py",
           "small = bool(passes and delta > 0 and effect == effect and upper < min_effect)", "small = False", GATE),
    Mutant("gate-abs-floor-strict", "gate policy", "kbase/comparison/noise.py",
           "abs(z) >= z_crit and abs(delta) >= abs_floor_ns", "abs(z) >= z_crit and abs(delta) > abs_floor_ns", GATE),
    Mutant("gate-abs-floor-in-ns", "gate policy", "kbase/comparison/significance.py",
           'abs_floor_ns=th_at["abs_floor_us"][i] * 1e3', 'abs_floor_ns=th_at["abs_floor_us"][i]', GATE),
    Mutant("gate-no-share-floor", "gate policy", "kbase/comparison/noise.py",
           "(share >= share_floor or share != share)", "(True or share != share)", GATE),
    Mutant("gate-no-relative-floor", "gate policy", "kbase/comparison/noise.py",
           "abs(delta) / before_ns >= rel_floor", "abs(delta) / before_ns >= 0", GATE),
    Mutant("gate-overrides-unread", "gate policy", "kbase/comparison/diff.py",
           "            out[key][hit] = value\n", "            pass\n", GATE),
    Mutant("gate-ignore-unread", "gate policy", "kbase/comparison/diff.py",
           'rows["gated"] = ((cls == KernelClass.REGRESSED.value) | new_gated) & ~rows["ignored"]',
           'rows["gated"] = ((cls == KernelClass.REGRESSED.value) | new_gated)', GATE),
    Mutant("gate-no-total-rule", "gate policy", "kbase/comparison/diff.py",
           "regressed=bool(enough and p < policy.alpha and k.delta_pct >= policy.total_increase_pct)",
           "regressed=False", GATE),
    Mutant("gate-new-kernels-always-fail", "gate policy", "kbase/comparison/gate.py",
           "fail_new = policy.new_kernel == NewKernelPolicy.FAIL", "fail_new = True", GATE),
    Mutant("gate-new-kernels-no-share-floor", "gate policy", "kbase/comparison/diff.py",
           'new_gated = ~has_b & (np.nan_to_num(rows["share_after"], nan=0.0) >= th["share_floor"])',
           "new_gated = ~has_b", GATE),
    Mutant("gate-step-gate-always-on", "gate policy", "kbase/comparison/gate.py",
           "if j.regressed and result.policy.step_gate:", "if j.regressed:", GATE),
    Mutant("gate-cannot-judge-never-fails", "gate policy", "kbase/comparison/gate.py",
           'if policy.cannot_judge == "fail":', "if False:", GATE),
    Mutant("gate-warn-only-unread", "gate policy", "kbase/comparison/gate.py",
           "        if warn_only:\n", "        if False:\n", GATE),
    Mutant("gate-gpu-count-not-compared", "gate policy", "kbase/comparison/diff.py",
           '("gpu_models", "GPU model"), ("gpu_count", "GPU count"),', '("gpu_models", "GPU model"),', GATE),
    Mutant("gate-allow-incomparable-unread", "gate policy", "kbase/comparison/gate.py",
           "if result.mismatches and (not allow_incomparable or NO_KERNELS in result.mismatches):",
           "if result.mismatches:", GATE),
    Mutant("gate-fewer-iterations-comparable", "gate policy", "kbase/comparison/diff.py",
           "< policy.min_iteration_ratio * before.n_units / before.n_captures):",
           "< 0 * before.n_units / before.n_captures):", GATE),
    Mutant("gate-acceptances-never-expire", "gate policy", "kbase/comparison/gate.py",
           "if (a.expires is None or a.expires >= today) and", "if True and", GATE),
    Mutant("gate-acceptances-out-of-range", "gate policy", "kbase/comparison/gate.py",
           "and (in_range is None or in_range(a.commit))]", "]", GATE),
    Mutant("gate-acceptances-by-full-name-only", "gate policy", "kbase/comparison/gate.py",
           '        _fail_or_accept(v, finding, index, (r["name"], r["short_name"]))\n    for r in',
           '        _fail_or_accept(v, finding, index, (r["name"],))\n    for r in', GATE),
]


def copy_repo(dest: Path) -> None:
    ignore = shutil.ignore_patterns(".venv", ".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache",
                                    "*.egg-info")
    for item in ("kbase", "tests", "migrations", "docs", "ci", "benchmarks"):
        shutil.copytree(ROOT / item, dest / item, ignore=ignore)
    for item in ("pyproject.toml", "alembic.ini", "README.md", "CHANGELOG.md"):
        shutil.copy(ROOT / item, dest / item)


def run(m: Mutant | None, tests: tuple[str, ...] = (), quiet: bool = True) -> tuple[bool, float]:
    """(caught, seconds): the tests run against a copy with the mutation (``m`` None: the control, unmutated,
    which must pass: otherwise "caught" would mean nothing)."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{m.name if m else 'control'}-") as tmp:
        dest = Path(tmp)
        copy_repo(dest)
        if m is not None:
            tests = m.tests
            target = dest / m.path
            text = target.read_text()
            if text.count(m.old) != 1:
                raise SystemExit(f"{m.name}: the text to mutate is not in {m.path} exactly once; update the mutant")
            target.write_text(text.replace(m.old, m.new))
        env = {**os.environ, "PYTHONPATH": f"{dest}{os.pathsep}{dest / 'tests'}", "PYTHONDONTWRITEBYTECODE": "1"}
        start = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
                           cwd=dest, env=env, capture_output=True, text=True)
        probe = subprocess.run([sys.executable, "-c", "import kbase, sys; print(kbase.__file__)"], cwd=dest, env=env,
                               capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(dest)):
            raise SystemExit(f"the copy's kbase is not the one imported ({probe.stdout.strip()})")
        if not quiet:
            print(r.stdout[-2000:])
        return r.returncode != 0, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--verbose", action="store_true")
    opts = ap.parse_args()
    chosen = [m for m in MUTANTS if not opts.only or m.name in opts.only.split(",")]
    if opts.list:
        for m in chosen:
            print(f"{m.family:18} {m.name:32} {m.path}")
        return
    control = tuple(sorted({t for m in chosen for t in m.tests}))
    failed, seconds = run(None, control, quiet=not opts.verbose)
    if failed:
        raise SystemExit(f"the tests fail without any mutation ({', '.join(control)}): fix them first")
    print(f"control: the tests pass unmutated ({seconds:.0f} s)", flush=True)
    survived = []
    for m in chosen:
        caught, seconds = run(m, quiet=not opts.verbose)
        print(f"{'caught  ' if caught else 'SURVIVED'} {m.family:18} {m.name:32} ({seconds:.0f} s)", flush=True)
        if not caught:
            survived.append(m.name)
    families = sorted({m.family for m in chosen})
    print(f"{len(chosen) - len(survived)} of {len(chosen)} planted mutations caught ({len(families)} families)"
          + (f"; survived: {', '.join(survived)}" if survived else ""))
    sys.exit(1 if survived else 0)


if __name__ == "__main__":
    main()
