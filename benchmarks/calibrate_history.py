"""The noise model over stored histories (``calibrate.py --only history,fpr,e2e,gatehist``; docs/noise-model.md):
step detection on simulated level histories, the false-positive rate of the per-kernel decision, steps found
through generated stores, and the gate with history noise."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
from calibrate_common import KINETO, calibration_settings, flagged_kernels

import kbase


def aa_run_noise(data: Path) -> np.ndarray:
    """Per-kernel run-to-run relative sd implied by the A/A pair: |difference| / sqrt(2), at least 0.1%."""
    s = calibration_settings()
    lbs = [kbase.top(data / KINETO.format(x), s) for x in "ab"]
    t = [lb.table.set_index("name")["per_iter_ns"] for lb in lbs]
    both = t[0].to_frame("a").join(t[1].to_frame("b"), how="inner")
    both = both[both["a"] / both["a"].sum() >= 0.001]
    return np.maximum(np.abs(both["b"] / both["a"] - 1) / np.sqrt(2), 0.001).to_numpy()


def history(data: Path | None, trials: int = 200) -> dict:
    from kbase.comparison.changepoints import kernel_steps

    rng = np.random.default_rng(7)
    sd = aa_run_noise(data) if data is not None else np.full(60, 0.003)
    n_k, n_c = len(sd), 40
    commits = [f"{i:040x}" for i in range(n_c)]
    names = [f"k{i}" for i in range(n_k)]
    exact3 = exact5 = creep_ok = false_noise = false_inj = 0
    cum = []
    for _ in range(trials):
        lv = 1e5 * (1 + rng.normal(0, 1, (n_k, n_c)) * sd[:, None])
        found = kernel_steps(lv, names, names, commits, 1e7)
        false_noise += len(found)
        x = lv.copy()
        x[0, 13:] *= 1.03
        x[1, 27:] *= 1.05
        for at in (5, 11, 17, 23, 29):
            x[2, at:] *= 1.01
        found = kernel_steps(x, names, names, commits, 1e7)
        by = {}
        for f in found:
            by.setdefault(f.name, []).append(f)
        exact3 += [(f.kind, f.to_commit) for f in by.get("k0", [])] == [("step", commits[13])]
        exact5 += [(f.kind, f.to_commit) for f in by.get("k1", [])] == [("step", commits[27])]
        cr = [f for f in by.get("k2", []) if f.kind == "creep"]
        creep_ok += len(cr) == 1
        cum += [cr[0].rel for cr in [cr] if cr]
        false_inj += sum(len(v) for k, v in by.items() if k not in ("k0", "k1", "k2"))
    print(f"\ngenerated histories ({trials} x {n_k} kernels x {n_c} commits, A/A run-to-run noise per kernel, "
          f"median sd {np.median(sd):.2%}):")
    print(f"  +3% step at the exact commit: {exact3}/{trials}; +5%: {exact5}/{trials}; five +1% steps reported as "
          f"one creep: {creep_ok}/{trials} (cumulative median {np.median(cum) if cum else float('nan'):+.1%})")
    print(f"  false steps: noise-only {false_noise / trials:.3f} per history; other kernels of the injected ones "
          f"{false_inj / trials:.3f} per history")
    return {"exact3": exact3, "exact5": exact5, "creep": creep_ok, "false": false_noise, "trials": trials}


def fpr(trials: int = 1000, kernels: int = 30) -> dict:
    """Pure-noise comparisons (no change at all), as the diff decides them: 5 iterations per side, 30
    kernels with 10-2,500 launches, a repeating mix of two shapes, 0.5-5% launch jitter, microsecond
    rounding and the ``run_noise`` run-to-run shift per capture; comparisons with any kernel flagged."""
    from kbase.analysis.sketch import build_sketches
    from kbase.comparison import noise
    from kbase.policy import Policy

    pol = Policy()
    rng = np.random.default_rng(11)
    z_crit = noise.z_threshold(pol.fpr, kernels)
    spec = [(int(rng.choice([10, 20, 40, 150, 600, 2500])), float(rng.choice([0.005, 0.01, 0.02, 0.05])),
             float(rng.uniform(2e4, 6e5))) for _ in range(kernels)]
    flagged = 0
    for _ in range(trials):
        hit = False
        for n, jit, base in spec:
            shapes = base * np.where(np.arange(n) % 5 < 2, 1.0, 1.6)
            sk, it = [], []
            for _side in range(2):
                run = 1 + rng.normal(0, pol.run_noise)
                d = np.rint(shapes * run * (1 + rng.normal(0, jit, n)) / 1000) * 1000
                sk.append(build_sketches(np.zeros(n, dtype=np.int64), np.arange(n), d, 1)[0])
                it.append(d.reshape(5, -1).sum(axis=1))
            within = [noise.iteration_estimate(it[0], it[1]), noise.launch_estimate(sk[0], sk[1], 1000.0)]
            rel = it[1].sum() / it[0].sum() - 1
            est = noise.pick_noise(float(rel), within, None, (1, 1), pol.run_noise)
            k = noise.decide(est, before_ns=it[0].mean(), after_ns=it[0].mean() * (1 + rel), wall_ns=it[0].mean() * 10,
                             z_crit=z_crit, abs_floor_ns=0, share_floor=0, rel_floor=0)
            hit |= k.regressed or k.improved
        flagged += hit
    print(f"\npure-noise comparisons ({trials} x {kernels} kernels, floors off): {flagged / trials:.1%} with a kernel "
          f"flagged (policy fpr {pol.fpr:.0%})")
    return {"rate": flagged / trials}


def e2e(commits: int = 40) -> dict:
    from kbase.synth.history import HistorySpec, InjectedStep, _kernel, generate_history

    k3, k5, kc = _kernel("void flash::flash_bwd"), _kernel("nvjet_hsh_256x128"), _kernel("void flash::flash_fwd")
    inj = [InjectedStep(13, k3, 1.03, "k3 +3%"), InjectedStep(27, k5, 1.05, "k5 +5%")]
    inj += [InjectedStep(at, kc, 1.01, f"creep {at}") for at in (5, 11, 17, 23, 31)]
    out = {}
    for label, spec in (("steps", HistorySpec(commits=commits, steps=inj)), ("noise", HistorySpec(commits=commits,
                                                                                                   steps=[]))):
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            h = generate_history(Path(tmp), spec)
            s = kbase.Settings.load(repo=h.repo, db=h.db_url, name=h.workload)
            rep = kbase.steps(s, last=commits)
            print(f"\ne2e generated store '{label}' ({commits} commits, {time.perf_counter() - t0:.0f} s): "
                  f"{len(rep.steps)} step(s)")
            for st in rep.steps:
                print(f"  {st.kind:5s} {st.short_name[:40]:40s} {st.rel:+.1%} at commit "
                      f"{h.commits.index(st.first_commit)}..{h.commits.index(st.to_commit)} ({st.steps} step(s))")
            out[label] = [(st.name, st.kind, h.commits.index(st.to_commit), round(st.rel, 3)) for st in rep.steps]
    return out


def gatehist(noise_commits: int = 60) -> dict:
    """The gate with history noise, end to end on generated stores (``kbase.synth.history``): +3% and +5%
    on two kernels at the newest commit after 6, 11 and 21 past baselines (young histories: few degrees
    of freedom), and a noise-only history gated commit by commit from the 6th on."""
    from kbase.synth.history import HistorySpec, InjectedStep, _kernel, generate_history

    k3, k5 = _kernel("nvjet_hsh_256x128"), _kernel("void flash::flash_fwd")
    out: dict = {}
    print("\ngate with history noise (generated stores, 4 iterations per capture):")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (7, 12, 22):
            h = generate_history(Path(tmp) / f"h{n}", HistorySpec(commits=n, iterations=4, steps=[
                InjectedStep(n - 1, k3, 1.03, "+3%"), InjectedStep(n - 1, k5, 1.05, "+5%")]))
            s = kbase.Settings.load(repo=h.repo, db=h.db_url, name=h.workload)
            rows = kbase.gate(h.commits[-2], h.commits[-1], s).comparison.result.rows
            got = rows.set_index("name").loc[[k3, k5]]
            other = set(flagged_kernels(rows)) - {k3, k5}
            print(f"  {n - 1:2d} past baselines: +3% {got.loc[k3, 'class']} (MDE {got.loc[k3, 'mde_rel']:.1%}), "
                  f"+5% {got.loc[k5, 'class']} (MDE {got.loc[k5, 'mde_rel']:.1%}); sources "
                  f"{sorted(set(got['noise_source']))}; other kernels flagged {len(other)}")
            out[n - 1] = (got.loc[k3, "class"], got.loc[k5, "class"], len(other))
        h = generate_history(Path(tmp) / "noise", HistorySpec(commits=noise_commits, iterations=4, steps=[]))
        s = kbase.Settings.load(repo=h.repo, db=h.db_url, name=h.workload)
        flagged = failed = 0
        for i in range(6, noise_commits):
            g = kbase.gate(h.commits[i - 1], h.commits[i], s)
            flagged += bool(flagged_kernels(g.comparison.result.rows))
            failed += g.verdict.code != 0
        print(f"  noise-only history: {flagged} of {noise_commits - 6} consecutive gates with a kernel flagged, "
              f"{failed} failed (policy fpr {s.policy.fpr:.0%})")
        out["noise"] = (flagged, failed, noise_commits - 6)
    return out
