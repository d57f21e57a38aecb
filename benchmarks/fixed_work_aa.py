"""False alarms on A/A pairs of captures without iteration markers (fixed work: ``kbase.synth.fixed_work``),
beside A/A pairs of iteration-marked captures (``kbase.synth.generate``), gated with the default policy; and
the detection of +5% and +10% slowdowns in the same programs. Part of ``benchmarks/calibrate.py``
(``--only fixedwork``); runnable alone:

    .venv/bin/python benchmarks/fixed_work_aa.py [--pairs 12]

Each A/A pair is two seeds of one program: every launch's jitter and each kernel's process-level factor
(``run_sd``, between-process noise) differ, the work does not. Programs: Gaussian elimination (per-launch work
shrinking 100x along the run), a stencil that fills its window, a solver with one launch of its main kernel
(which the gate must call "cannot judge", never a regression), and a mixed program of six kernels. Last, the
solver again with a history of stored whole-program baselines, which judges its single launch per run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import kbase
from kbase.synth.fixed_work import FixedKernel, FixedWorkSpec, generate_fixed_work
from kbase.synth.generate import generate_export

FAN1 = FixedKernel("Fan1(float*, float*, int, int)", "Fan1", 1023, 30_000, 2_000)
FAN2 = FixedKernel("Fan2(float*, float*, float*, int, int, int)", "Fan2", 1023, 400_000, 4_000)
STENCIL = FixedKernel("void stencil_kernel<float>(float const*, float*, int)", "stencil_kernel", 800, 250_000)
SOLO = FixedKernel("void dp_kernel<256>(int*, int const*, int)", "dp_kernel", 1, 40_000_000)
INIT = FixedKernel("void init_kernel(int*, int)", "init_kernel", 400, 20_000)
MIXED = [FixedKernel(f"void k{i}_kernel<float>(float*, int)", f"k{i}_kernel", n, t, t / d, 0.01 + 0.01 * i)
         for i, (n, t, d) in enumerate([(2000, 15_000, 1), (500, 120_000, 3), (64, 900_000, 1), (3000, 4_000, 1),
                                        (12, 2_000_000, 10), (250, 60_000, 1)])]
PROGRAMS = {"gauss (trend)": [FAN1, FAN2], "stencil (fills window)": [STENCIL, INIT],
            "solver (1 launch)": [SOLO, INIT], "mixed (6 kernels)": MIXED}
FLAGGED = ("regressed", "regressed_below_floor", "improved")


def _gate(a: Path, b: Path, settings: kbase.Settings) -> tuple[str, list[str], list[str]]:
    g = kbase.gate(str(a), str(b), settings)
    rows = g.comparison.result.records()
    return (g.verdict.status.value, [r["short_name"] for r in rows if r["class"] in FLAGGED],
            [r["short_name"] for r in rows if r["class"] == "cannot_judge"])


def fixed_work(pairs: int = 12, run_sd: float = 0.003) -> dict:
    """Per program: A/A pairs gated (FAILs, pairs with any kernel flagged, kernels called cannot judge), and
    +5% / +10% on the program's main kernel (detected, gate FAIL)."""
    out: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        settings = kbase.Settings.load(repo=d)
        print(f"\nfixed-work A/A pairs ({pairs} per program, per-process sd {run_sd:.1%}, default policy) beside "
              "iteration-marked ones")
        print(f"  {'program':<26}{'unit':<15}{'gate FAIL':>10}{'any flag':>10}{'cannot judge':>14}"
              f"{'+5% found':>11}{'+10% found':>12}")
        for label, kernels in PROGRAMS.items():
            fails = flags = unjudged = 0
            found = {0.05: 0, 0.10: 0}
            unit = ""
            main = max(kernels, key=lambda k: k.launches * (k.first_ns + (k.last_ns or k.first_ns)))
            for p in range(pairs):
                a = generate_fixed_work(d / "a.sqlite", FixedWorkSpec(kernels, seed=2 * p + 1, run_sd=run_sd),
                                        overwrite=True)
                b = generate_fixed_work(d / "b.sqlite", FixedWorkSpec(kernels, seed=2 * p + 2, run_sd=run_sd),
                                        overwrite=True)
                status, flagged, cannot = _gate(a, b, settings)
                fails += status == "fail"
                flags += bool(flagged)
                unjudged += len(cannot)
                unit = unit or kbase.compare(str(a), str(b), settings).result.totals.unit
                for step in found:
                    c = generate_fixed_work(d / "c.sqlite", FixedWorkSpec(kernels, seed=2 * p + 2, run_sd=run_sd,
                                                                          slowdown={main.name: 1 + step}),
                                            overwrite=True)
                    found[step] += _gate(a, c, settings)[0] == "fail"
            out[label] = {"unit": unit, "fail": fails / pairs, "flagged": flags / pairs, "cannot_judge": unjudged,
                          "found": {k: v / pairs for k, v in found.items()}}
            print(f"  {label:<26}{unit:<15}{fails / pairs:>10.1%}{flags / pairs:>10.1%}{unjudged:>14}"
                  f"{found[0.05] / pairs:>11.0%}{found[0.10] / pairs:>12.0%}")
        fails = flags = 0
        for p in range(pairs):  # the iteration-marked program of the other tables, as A/A pairs
            a = generate_export(d / "ia.sqlite", seed=2 * p + 1, n_gpus=1, iterations=8, overwrite=True).path
            b = generate_export(d / "ib.sqlite", seed=2 * p + 2, n_gpus=1, iterations=8, overwrite=True).path
            status, flagged, _ = _gate(a, b, settings)
            fails += status == "fail"
            flags += bool(flagged)
        out["iterations (synth mix)"] = {"unit": "iteration", "fail": fails / pairs, "flagged": flags / pairs}
        print(f"  {'iterations (synth mix)':<26}{'iteration':<15}{fails / pairs:>10.1%}{flags / pairs:>10.1%}"
              "   (the iteration generator has no per-process noise)")
    out["solver, history per run"] = solver_history(pairs, run_sd=run_sd)
    return out


QUIET_SOLO = FixedKernel(SOLO.name, SOLO.short_name, 1, SOLO.first_ns, jitter=0.005)


def solver_history(pairs: int = 12, past: int = 6, run_sd: float = 0.003) -> dict:
    """The solver's single launch (0.5% launch jitter) judged by history per run: ``past`` stored whole-program
    baselines at successive commits (a git repository), then a candidate capture gated against the newest — A/A,
    +10%, +20% on the single launch. Per pair: FAILs, the kernel's noise source, its MDE."""
    import dataclasses

    import git

    fails = flags = 0
    found = {0.10: 0, 0.20: 0}
    mdes, sources = [], set()
    kernels = [QUIET_SOLO, INIT]
    for p in range(pairs):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            repo = git.Repo.init(d / "repo", initial_branch="main")
            actor = git.Actor("calibrate", "calibrate@kbase.invalid")
            settings = kbase.Settings.load(repo=d / "repo", db=f"sqlite:///{d / 's.db'}", name="solver")
            for i in range(past):
                (d / "repo" / "v.txt").write_text(str(i))
                repo.index.add(["v.txt"])
                sha = repo.index.commit(f"c{i}", author=actor, committer=actor).hexsha
                f = generate_fixed_work(d / f"r{i}.sqlite", FixedWorkSpec(kernels, seed=100 * p + i, run_sd=run_sd))
                kbase.snapshot(str(f), settings, rev=sha)
            for step in (0.0, *found):
                c = generate_fixed_work(d / "c.sqlite", FixedWorkSpec(kernels, seed=100 * p + 50, run_sd=run_sd,
                                                                      slowdown={SOLO.name: 1 + step}), overwrite=True)
                g = kbase.gate(sha, str(c), dataclasses.replace(settings))
                row = next(r for r in g.comparison.result.records() if r["short_name"] == SOLO.short_name)
                if step:
                    found[step] += g.verdict.status.value == "fail"
                    continue
                fails += g.verdict.status.value == "fail"
                flags += row["class"] in FLAGGED
                mdes.append(row["mde_rel"])
                sources.add(row["noise_source"])
    mde = sorted(mdes)[len(mdes) // 2]
    print(f"  {'solver, history of ' + str(past):<26}{'run':<15}{fails / pairs:>10.1%}{flags / pairs:>10.1%}"
          f"{'-':>14}{'':>11}{found[0.10] / pairs:>12.0%}   +20% found {found[0.20] / pairs:.0%}; noise "
          f"{', '.join(sorted(sources))}, median MDE {mde:.1%}")
    return {"unit": "run", "fail": fails / pairs, "flagged": flags / pairs, "mde": mde, "sources": sorted(sources),
            "found": {k: v / pairs for k, v in found.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=12)
    ap.add_argument("--run-sd", type=float, default=0.003)
    args = ap.parse_args(argv)
    fixed_work(args.pairs, args.run_sd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
