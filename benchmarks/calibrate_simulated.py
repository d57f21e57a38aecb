"""Simulated fresh processes (``calibrate.py --only simfresh,floor``; docs/noise-model.md): the gate's false FAILs
over pairs of ``kbase.synth.fresh`` processes, with and without history, and the choice of ``min_effect_pct``
against real and simulated pairs."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
from calibrate_common import calibration_settings, fresh_sets

import kbase
from kbase.comparison.diff import compute_diff
from kbase.comparison.side import side_from_captures, side_from_leaderboards

SIM_KINDS = {"resnet": 0.015, "transformer": 0.01}  # workload kind -> per-process sd of a library kernel's speed


def simfresh(trials: int = 6, processes: int = 8) -> dict:
    """Simulated fresh processes (``kbase.synth.fresh``): the false-FAIL rate over every ordered pair of each
    workload's processes, by rule; with history: the other processes' levels as past baselines (robust sd, as
    ``comparison.history``); then detection of regressions injected at and over the floor."""
    from kbase.comparison.gate import decide
    from kbase.policy import Policy
    from kbase.synth.fresh import FreshSpec, process, without_ops, workload

    pol = Policy()
    zero = Policy(min_effect_pct=0.0)
    rules = {"library-swap rule, min_effect 0 (before)": (zero, False, False),
             "ops, min_effect 0": (zero, True, False), "ops, min_effect default": (pol, True, False),
             "ops, min_effect 0, history": (zero, True, True), "ops, min_effect default, history": (pol, True, True)}
    out: dict = {}
    rng = np.random.default_rng(5)
    for kind, shift in SIM_KINDS.items():
        fails = dict.fromkeys(rules, 0)
        pairs = 0
        detect = {1.0: [0, 0], 2.0: [0, 0]}  # injected effect as a multiple of the floor -> [failed, tried]
        for t in range(trials):
            w = workload(FreshSpec(seed=t, kind=kind, kernel_shift=shift))
            caps = [process(w, i) for i in range(processes)]
            for x, y in itertools.permutations(range(processes), 2):
                pairs += 1
                hist = _sim_history([c for i, c in enumerate(caps) if i not in (x, y)], pol.min_history)
                for label, (policy, with_ops, use_hist) in rules.items():
                    f = (lambda c: c) if with_ops else without_ops
                    r = compute_diff(side_from_captures([f(caps[x])], "a"), side_from_captures([f(caps[y])], "b"),
                                     policy, history=hist if use_hist else None)
                    fails[label] += decide(r).code == 1
                if x != 0:
                    continue
                # detection: a regression injected into one random kernel of at least 1% share
                wall = caps[y].summary.window_ns / caps[y].summary.iterations
                shares = caps[y].total_ns / caps[y].summary.iterations / wall
                big = np.flatnonzero(shares >= 0.01)
                i = int(big[rng.integers(len(big))])
                for mult in detect:
                    factor = 1.0 + mult * pol.min_effect_pct / 100 / float(shares[i])
                    slow = process(w, y, inject={str(caps[y].names[i]): factor})
                    r = compute_diff(side_from_captures([caps[x]], "a"), side_from_captures([slow], "b"), pol,
                                     history=hist)
                    detect[mult][0] += decide(r).code == 1
                    detect[mult][1] += 1
        print(f"\nsimulated fresh processes, {kind}-like ({trials} workloads x {processes} processes = {pairs} "
              f"ordered pairs; per-process sd of a library kernel's speed {shift:.1%}):")
        for label, n in fails.items():
            print(f"  {label}: {n}/{pairs} gates FAIL ({n / pairs:.1%})")
        for mult, (failed, tried) in detect.items():
            print(f"  a regression of {mult:g}x min_effect_pct injected into one kernel of >= 1% share (history on, "
                  f"default rule): {failed}/{tried} gates FAIL")
        out[kind] = {"fails": fails, "pairs": pairs, "detect": detect}
    return out


def _sim_history(caps: list, min_history: int):
    """History noise from past processes' captures, as ``comparison.history.noise_from_history`` computes it."""
    from kbase.comparison.history import HistoryNoise
    from kbase.comparison.noise import history_noise

    def levels(names_of, values_of) -> tuple[list[str], np.ndarray]:
        names = sorted({n for c in caps for n in names_of(c)})
        m = np.full((len(names), len(caps)), np.nan)
        for j, c in enumerate(caps):
            for n, v in zip(names_of(c), values_of(c)):
                m[names.index(n), j] = v
        return names, m

    kn, km = levels(lambda c: c.names.tolist(), lambda c: (c.total_ns / c.summary.iterations).tolist())

    def op_levels(c):
        out: dict[str, float] = {}
        for op, total in zip(c.ops.op.tolist(), c.ops.total_ns.tolist()):
            key = str(c.ops.names[op])
            out[key] = out.get(key, 0.0) + total / c.summary.iterations
        return out

    on, om = levels(lambda c: list(op_levels(c)), lambda c: list(op_levels(c).values()))
    ops = dict(zip(on, history_noise(om, min_history).tolist()))
    return HistoryNoise(sd=dict(zip(kn, history_noise(km, min_history).tolist())), df=max(0.4 * (len(caps) - 1), 2.0),
                        ops=ops, op_groups=ops)


def floor(data: Path | None) -> dict:
    """The choice of ``min_effect_pct``: real fresh-process pairs that would FAIL and the largest between-process
    effect they show, against the injected regressions the gate then still catches, for a range of floors."""
    import dataclasses

    from kbase.comparison.gate import decide
    from kbase.policy import Policy
    from kbase.synth.fresh import FreshSpec, process, workload

    floors = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
    real: dict[float, int] = dict.fromkeys(floors, 0)
    n_real = 0
    if data is not None:
        s = calibration_settings()
        for files in fresh_sets(data).values():
            if not all(f.is_file() for f in files):
                continue
            prof = {f: kbase.read(f, s) for f in files}
            sides = {f: side_from_leaderboards([kbase.leaderboard(kbase.window(prof[f], s), sketches=True)], f.name)
                     for f in files}
            for x, y in itertools.permutations(files, 2):
                n_real += 1
                for fl in floors:
                    pol = dataclasses.replace(s.policy, min_effect_pct=fl)
                    real[fl] += decide(compute_diff(sides[x], sides[y], pol)).code == 1
    sim: dict[float, int] = dict.fromkeys(floors, 0)
    n_sim = 0
    for kind, shift in SIM_KINDS.items():
        for t in range(6):
            w = workload(FreshSpec(seed=100 + t, kind=kind, kernel_shift=shift))
            sides = [side_from_captures([process(w, i)], str(i)) for i in range(4)]
            for x, y in itertools.permutations(range(4), 2):
                n_sim += 1
                for fl in floors:
                    sim[fl] += decide(compute_diff(sides[x], sides[y], Policy(min_effect_pct=fl))).code == 1
    print("\nmin_effect_pct: gates FAIL on pairs where nothing changed but the process (real V100 ResNet-50 pairs; "
          "simulated ResNet- and transformer-like pairs, no history):")
    print("| min_effect_pct | real pairs FAIL | simulated pairs FAIL |")
    print("|---|---|---|")
    for fl in floors:
        print(f"| {fl:g}% | {real[fl]}/{n_real} | {sim[fl]}/{n_sim} |")
    return {"real": real, "sim": sim, "n_real": n_real, "n_sim": n_sim}
