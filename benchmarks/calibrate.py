"""Calibrate the noise model (not a timed test): false flags and detection rates on real traces and on
generated histories. Prints the tables docs/noise-model.md quotes.

    .venv/bin/python benchmarks/calibrate.py [--data DIR] [--only aa,inject,nsys,workers,fpr,history,e2e,gatehist]

- ``aa``: the A/A pair (two captures of one configuration) diffed both ways: kernels flagged, gate verdict.
- ``inject``: +2/3/5/10% injected into one kernel at a time of the pair's second capture (every launch's
  duration scaled, as scaling ``dur`` of its events in a copy of the trace), for every kernel with
  >= 1% and >= 5% share: flagged, ranked first, other kernels flagged.
- ``nsys``: an Nsight Systems export without step markers, a copy with its top kernel's launches all
  10% slower (``end`` rewritten in the SQLite copy): gate against the original, and the original against itself.
- ``workers``: ResNet-50 DataLoader workers0 vs workers4 (cuDNN algorithm swaps): gate verdict, swap note.
- ``fpr``: simulated pure-noise comparisons through the same estimators and decision: the real rate
  of comparisons with any kernel flagged, against the policy's ``fpr``.
- ``history``: 40-commit per-kernel level histories with the A/A pair's run-to-run noise per kernel
  (numeric, 200 trials): +3% and +5% steps located exactly, a creep of five +1% steps with its
  cumulative size, false steps in noise-only histories.
- ``e2e``: one generated 40-commit store (``kbase.synth.history``: git repository, exports, snapshots)
  with a +3% and a +5% step and a five-step +1% creep, through ``kbase.steps``; and a noise-only one.
- ``gatehist``: the gate with history noise on generated stores: +3% / +5% at the newest commit after
  6, 11 and 21 past baselines, and a 60-commit noise-only history gated commit by commit.
- ``--repeats GLOB``: any set of repeat captures of one configuration (yours): every ordered pair
  diffed and gated (every flag is a false one), then the ``inject`` table on the first two.
"""

from __future__ import annotations

import argparse
import glob
import itertools
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import kbase
from kbase.comparison.diff import compute_diff
from kbase.comparison.side import side_from_leaderboards

KINETO = "kineto/v100_resnet50_w4_repeat_{}.pt.trace.json.gz"


def _settings(**kw) -> kbase.Settings:
    return kbase.Settings.load(db="sqlite:///" + str(Path(tempfile.gettempdir()) / "kbase-calibrate.db"), **kw)


def _flagged(rows) -> list[str]:
    return list(rows.loc[rows["class"].isin(["regressed", "improved"]), "name"])


def _aa_gate(x: Path | str, y: Path | str, s: kbase.Settings) -> tuple[list[str], str, int, list[str]]:
    """One A/A comparison gated: (kernels flagged, gate status, kernels compared, noise notes)."""
    g = kbase.gate(str(x), str(y), s)
    result = g.comparison.result
    return (_flagged(result.rows), g.verdict.status.value, len(result.rows),
            [n for n in result.notes if n.startswith("noise")])


def aa(data: Path) -> dict:
    s = _settings()
    a, b = (data / KINETO.format(x) for x in "ab")
    out = {}
    for x, y, label in ((a, b, "a->b"), (b, a, "b->a")):
        names, status, kernels, notes = _aa_gate(x, y, s)
        out[label] = (len(names), status)
        print(f"A/A {label}: {len(names)} kernels flagged of {kernels}; gate {status}; {notes}")
    return out


def inject(data: Path) -> dict:
    return inject_pair(data / KINETO.format("a"), data / KINETO.format("b"))


def inject_pair(first: Path, second: Path) -> dict:
    """The ``inject`` table for two captures of one configuration (slowdowns go into the second)."""
    s = _settings()
    prof = {"a": kbase.read(first, s), "b": kbase.read(second, s)}
    before = side_from_leaderboards([kbase.leaderboard(kbase.window(prof["a"], s), sketches=True)], "a")
    lb = kbase.leaderboard(kbase.window(prof["b"], s), sketches=True)
    wall = lb.summary.window_ns / max(lb.summary.iterations, 1) * max(lb.summary.gpus, 1)
    share = lb.table.set_index("name")["total_ns"] / lb.summary.iterations / wall
    k = prof["b"].columns  # the profile's own arrays: the window reads these
    end0 = k.end.copy()
    start = k.start
    codes = k.name
    cats = k.names.tolist()
    results: dict = {}
    print("\n| effect | share | kernels | flagged | ranked first | other kernels flagged | "
          "missed (share, MDE, source) |")
    print("|---|---|---|---|---|---|---|")
    for f in (0.02, 0.03, 0.05, 0.10):
        for lo in (0.01, 0.05):
            names = list(share[share >= lo].index)
            hit = first = other = 0
            missed = []
            for name in names:
                m = codes == cats.index(name)
                end = end0.copy()
                end[m] = start[m] + np.rint((end0[m] - start[m]) * (1 + f)).astype(end0.dtype)
                k.end = end
                after = side_from_leaderboards([kbase.leaderboard(kbase.window(prof["b"], s), sketches=True)], "b")
                k.end = end0
                rows = compute_diff(before, after, s.policy).rows
                flagged = set(rows.loc[rows["class"] == "regressed", "name"])
                ok = name in flagged
                hit += ok
                first += bool(ok and rows.iloc[0]["name"] == name)
                other += bool(set(_flagged(rows)) - {name})
                if not ok:
                    r = rows[rows["name"] == name].iloc[0]
                    missed.append(f"{r['short_name']} ({share[name]:.1%}, MDE {r['mde_rel']:.1%}, {r['noise_source']})")
            results[(f, lo)] = (hit, len(names))
            print(f"| +{f:.0%} | >= {lo:.0%} | {len(names)} | {hit}/{len(names)} | {first} | {other} | "
                  f"{'; '.join(missed) or '-'} |")
    return results


def repeats(paths: list[Path]) -> dict:
    """Every ordered pair of repeat captures of one configuration (every difference is noise): kernels
    flagged and gate verdicts; then the ``inject`` table on the first two."""
    s = _settings()
    print(f"\nrepeat captures: {', '.join(p.name for p in paths)}")
    flagged, failed, pairs, kernels = 0, 0, 0, 0
    for x, y in itertools.permutations(paths, 2):
        names, status, kernels, _ = _aa_gate(x, y, s)
        flagged += len(names)
        failed += status != "pass"
        pairs += 1
        if names:
            print(f"  {x.name} -> {y.name}: flagged {names}; gate {status}")
    print(f"  {pairs} ordered pairs of {kernels} kernels: {flagged} kernel flags in all, {failed} gates not PASS")
    return {"pairs": pairs, "flagged": flagged, "failed": failed, "inject": inject_pair(paths[0], paths[1])}


def _top_kernel_slower(src: Path, dst: Path, factor: float) -> str:
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        top, = con.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY demangledName "
                           "ORDER BY SUM(end - start) DESC LIMIT 1").fetchone()
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + CAST(ROUND((end - start) * ?) AS INTEGER) "
                    "WHERE demangledName = ?", (factor, top))
        con.commit()
        name, = con.execute("SELECT value FROM StringIds WHERE id = ?", (top,)).fetchone()
    finally:
        con.close()
    return str(name)


def nsys(data: Path) -> dict:
    src = data / "nsys/h100_2gpu_fsdp_t5.sqlite"
    s = _settings()
    with tempfile.TemporaryDirectory() as tmp:
        slow = Path(tmp) / "slow.sqlite"
        name = _top_kernel_slower(src, slow, 1.10)
        g = kbase.gate(str(src), str(slow), s)
        rows = g.comparison.result.rows
        r = rows[rows["name"] == name].iloc[0]
        t = g.comparison.result.totals.kernel
        print(f"nsys no markers, top kernel +10%: {r['short_name']} class {r['class']} (share {r['share_before']:.1%}, "
              f"rel {r['rel']:+.1%}, source {r['noise_source']}, MDE {r['mde_rel']:.1%}); total kernel time "
              f"{t.delta_pct:+.1f}% (p={t.p_value:.2g}, regressed={t.regressed}); gate {g.verdict.status.value}; "
              f"aligned {g.comparison.after.side.aligned}")
        same = kbase.gate(str(src), str(src), s)
        print(f"nsys no markers, against itself: {len(_flagged(same.comparison.result.rows))} flagged; gate "
              f"{same.verdict.status.value}")
        return {"slow": (r["class"], g.verdict.status.value), "same": same.verdict.status.value}


def workers(data: Path) -> dict:
    s = _settings()
    a, b = (str(data / f"kineto/v100_resnet50_workers{n}.pt.trace.json.gz") for n in (0, 4))
    g = kbase.gate(a, b, s)
    swaps = [n for n in g.comparison.result.notes if n.startswith("algorithm swap")]
    print(f"workers0 vs workers4: gate {g.verdict.status.value}; {len(_flagged(g.comparison.result.rows))} kernels "
          f"flagged; swap reported: {bool(swaps)}")
    return {"status": g.verdict.status.value, "swap": bool(swaps)}


def aa_run_noise(data: Path) -> np.ndarray:
    """Per-kernel run-to-run relative sd implied by the A/A pair: |difference| / sqrt(2), at least 0.1%."""
    s = _settings()
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
            other = set(_flagged(rows)) - {k3, k5}
            print(f"  {n - 1:2d} past baselines: +3% {got.loc[k3, 'class']} (MDE {got.loc[k3, 'mde_rel']:.1%}), "
                  f"+5% {got.loc[k5, 'class']} (MDE {got.loc[k5, 'mde_rel']:.1%}); sources "
                  f"{sorted(set(got['noise_source']))}; other kernels flagged {len(other)}")
            out[n - 1] = (got.loc[k3, "class"], got.loc[k5, "class"], len(other))
        h = generate_history(Path(tmp) / "noise", HistorySpec(commits=noise_commits, iterations=4, steps=[]))
        s = kbase.Settings.load(repo=h.repo, db=h.db_url, name=h.workload)
        flagged = failed = 0
        for i in range(6, noise_commits):
            g = kbase.gate(h.commits[i - 1], h.commits[i], s)
            flagged += bool(_flagged(g.comparison.result.rows))
            failed += g.verdict.code != 0
        print(f"  noise-only history: {flagged} of {noise_commits - 6} consecutive gates with a kernel flagged, "
              f"{failed} failed (policy fpr {s.policy.fpr:.0%})")
        out["noise"] = (flagged, failed, noise_commits - 6)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--only", default="aa,inject,nsys,workers,fpr,history,e2e,gatehist")
    ap.add_argument("--repeats", action="append", default=[], metavar="GLOB",
                    help="repeat captures of one configuration (a glob; may be given again for another): "
                         "every ordered pair diffed and gated, then the inject table on the first two")
    args = ap.parse_args(argv)
    groups = [sorted(Path(p) for p in glob.glob(pattern)) for pattern in args.repeats]
    for pattern, found in zip(args.repeats, groups):
        if len(found) < 2:
            print(f"--repeats {pattern}: matches {len(found)} file(s); two or more are needed", file=sys.stderr)
            return 2
    for found in groups:
        repeats(found)
    if args.repeats and args.only == ap.get_default("only"):
        return 0  # --repeats alone: only those
    only = set(args.only.split(","))
    have = (args.data / KINETO.format("a")).exists()
    if not have:
        print(f"no real data under {args.data}: real-trace sections skipped", file=sys.stderr)
    for name, fn in (("aa", aa), ("inject", inject), ("nsys", nsys), ("workers", workers)):
        if name in only and have:
            fn(args.data)
    if "fpr" in only:
        fpr()
    if "history" in only:
        history(args.data if have else None)
    if "e2e" in only:
        e2e()
    if "gatehist" in only:
        gatehist()
    return 0


if __name__ == "__main__":
    sys.exit(main())
