"""The step rule's calibration (``calibrate.py --only step``): false alarms and power beside the kernels'.

- Real fresh-process captures (tests/data/kineto and ../shared/data/kineto): every ordered pair, single captures
  per side (the fallback ``step_run_noise``), with the step verdict (regressed / improved / not judged / within
  noise) beside the kernel rule's failures. Pairs of one configuration (A/A: same DataLoader workers) must never
  regress; 4 -> 0 workers is a real step change (+20-30%) the rule should catch.
- Simulated processes (``kbase.synth``: each seed another process, its own launch timings and host noise): A/A
  pairs for false alarms, and a slower host (``host_delay_ns``: CPU time per step before its input copy) for
  power, with one capture per side and with three repeats per side (between-process noise from the repeats).
"""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

import kbase
from kbase.comparison.diff import compute_diff
from kbase.comparison.gate import STEP_TIME, decide
from kbase.comparison.side import side_from_leaderboards
from kbase.policy import Policy

REPO = Path(__file__).resolve().parents[1]


def _board(path: Path):
    s = kbase.Settings.load()
    return kbase.leaderboard(kbase.window(kbase.read(path, s), s), sketches=True)


def _verdict(result) -> str:
    j = result.budget.step if result.budget is not None else None
    if j is None:
        return "none"
    return ("regressed" if j.regressed else "improved" if j.improved else "within noise" if j.judged
            else "not judged")


def _configs(data: Path) -> dict[Path, str]:
    local = REPO / "tests" / "data" / "kineto"
    out = {local / f"v100_resnet50_w{n}_jan2021.pt.trace.json.gz": f"jan-w{n}" for n in (0, 4)}
    out |= {local / f"v100_resnet50_w0_jun2021_{x}.pt.trace.json.gz": "jun-w0" for x in "ab"}
    out |= {data / "kineto" / f"v100_resnet50_w4_repeat_{x}.pt.trace.json.gz": "jun-w4" for x in "ab"}
    # the pytorch/kineto plugin samples of an earlier run (another machine and date): their own pair
    out |= {data / "kineto" / f"v100_resnet50_workers{n}.pt.trace.json.gz": f"dec-w{n}" for n in (0, 4)}
    return {p: c for p, c in out.items() if p.is_file()}


def real(data: Path) -> dict:
    configs = _configs(data)
    boards = {p: _board(p) for p in configs}
    counts = {"aa_pairs": 0, "aa_step_fail": 0, "aa_kernel_fail": 0, "w4_to_w0": 0, "w4_to_w0_caught": 0,
              "w4_to_w0_regressed": 0, "w0_to_w4_fail": 0}
    print("step rule on real fresh-process pairs (one capture per side: fallback step_run_noise)")
    print(f"  {'before':<42} {'after':<42} {'step Δ':>8}  {'step verdict':<13} kernel/op fails")
    for x, y in itertools.permutations(configs, 2):
        cx, cy = configs[x], configs[y]
        if cx.split("-")[0] != cy.split("-")[0]:
            continue  # captures of different runs (machines, dates): not a pair of one job
        result = compute_diff(side_from_leaderboards([boards[x]], x.name), side_from_leaderboards([boards[y]], y.name),
                              Policy())
        v = decide(result)
        kernel_fails = [f.name for f in v.failing if f.name != STEP_TIME]
        step = result.budget.step if result.budget is not None else None
        verdict = _verdict(result)
        print(f"  {x.name[:42]:<42} {y.name[:42]:<42} {step.delta_pct if step else float('nan'):>+7.1f}%  "
              f"{verdict:<13} {len(kernel_fails)}")
        if cx == cy:
            counts["aa_pairs"] += 1
            counts["aa_step_fail"] += verdict == "regressed"
            counts["aa_kernel_fail"] += bool(kernel_fails)
        elif cx.endswith("w4") and cy.endswith("w0"):
            counts["w4_to_w0"] += 1
            counts["w4_to_w0_caught"] += verdict in ("regressed", "not judged")
            counts["w4_to_w0_regressed"] += verdict == "regressed"
        else:
            counts["w0_to_w4_fail"] += verdict == "regressed"
    print(f"  A/A pairs: step false alarms {counts['aa_step_fail']}/{counts['aa_pairs']}, kernel/op false alarms "
          f"{counts['aa_kernel_fail']}/{counts['aa_pairs']}; 4 -> 0 workers: regressed "
          f"{counts['w4_to_w0_regressed']}/{counts['w4_to_w0']}, reported (regressed or not judged) "
          f"{counts['w4_to_w0_caught']}/{counts['w4_to_w0']}; 0 -> 4 workers regressed {counts['w0_to_w4_fail']}")
    return counts


def simulated(processes: int = 6, repeats: int = 3, delays_pct: tuple[float, ...] = (5, 10, 20, 30)) -> dict:
    from kbase.synth.generate import generate_export

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        def board(seed: int, delay_ns: int):
            p = Path(tmp) / f"s{seed}_d{delay_ns}.sqlite"
            if not p.exists():
                generate_export(p, n_gpus=1, iterations=8, seed=seed, host_delay_ns=delay_ns)
            return _board(p)

        base = [board(s, 0) for s in range(processes)]
        step_ns = base[0].summary.budget["total"]["step_wall_ns"] / base[0].summary.iterations
        fa = 0
        pairs = list(itertools.permutations(range(processes), 2))
        for i, j in pairs:
            r = compute_diff(side_from_leaderboards([base[i]], "a"), side_from_leaderboards([base[j]], "b"), Policy())
            fa += _verdict(r) == "regressed"
        print(f"step rule on simulated processes (1 GPU, 8 iterations, step {step_ns / 1e6:.1f} ms)")
        print(f"  A/A: {fa}/{len(pairs)} ordered pairs regressed (one capture per side)")
        out["aa"] = (fa, len(pairs))
        for pct in delays_pct:
            delay = int(step_ns * pct / 100)
            slow = [board(100 + s, delay) for s in range(processes)]
            single = sum(_verdict(compute_diff(side_from_leaderboards([base[i]], "a"),
                                               side_from_leaderboards([slow[i]], "b"), Policy())) == "regressed"
                         for i in range(processes))
            grouped = 0
            groups = processes // repeats
            for g in range(groups):
                sel = slice(g * repeats, (g + 1) * repeats)
                r = compute_diff(side_from_leaderboards(base[sel], "a"), side_from_leaderboards(slow[sel], "b"),
                                 Policy())
                grouped += _verdict(r) == "regressed"
            print(f"  host +{pct:g}% of the step: caught {single}/{processes} with one capture per side, "
                  f"{grouped}/{groups} with {repeats} repeats per side")
            out[pct] = (single, processes, grouped, groups)
    return out


def calibrate(data: Path | None) -> dict:
    return {"real": real(data) if data is not None else None, "simulated": simulated()}
