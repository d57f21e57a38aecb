"""Calibrate the noise model (not a timed test): false flags and detection rates on real traces and on
generated histories. Prints the tables docs/noise-model.md quotes.

    .venv/bin/python benchmarks/calibrate.py [--data DIR] [--only aa,inject,nsys,workers,fresh,simfresh,floor,
                                                                  fpr,history,e2e,gatehist,fixedwork,step]

- ``aa``: the A/A pair (two captures of one configuration) diffed and gated both ways: kernels flagged, gate
  verdict, the swap notes.
- ``inject``: +2/3/5/10% injected into one kernel at a time of the pair's second capture (every launch's
  duration scaled, as scaling ``dur`` of its events in a copy of the trace), for every kernel with
  >= 1% and >= 5% share: flagged (``regressed``, or ``regressed (below gate floor)`` when its effect on the
  iteration is under ``min_effect_pct``), ranked first, other kernels flagged; then the gate: it must fail on
  every injection whose effect is >= ``min_effect_pct`` and on none below. ``injectswap``: the same into the
  4-worker capture of the January 2021 workers0/workers4 pair, where the convolutions are an algorithm swap
  (judged by op: the regression must still fail the gate, through its op).
- ``nsys``: an Nsight Systems export without step markers, a copy with its top kernel's launches all
  10% slower (``end`` rewritten in the SQLite copy): gate against the original, and the original against itself.
- ``workers``: ResNet-50 DataLoader workers0 vs workers4 (cuDNN algorithm swaps), both ways: gate verdict,
  swap notes.
- ``fresh``: every ordered pair of real fresh-process captures of one configuration (tests/data/kineto and the
  shared pairs: June 2021 four processes, January 2021 two, December 2020 two) gated with the default policy,
  with ``min_effect_pct`` 0, and without op information (the library-swap rule): FAILs; then each June pair
  with the other captures stored as its history.
- ``simfresh``: simulated fresh processes (``kbase.synth.fresh``: per-process algorithm picks, kernel-specific
  shifts of 1-2% on library kernels, helper launch counts): the gate's false-FAIL rate over every ordered pair,
  by rule, with and without history; and the detection of injected regressions at and over the floor.
- ``floor``: the choice of ``min_effect_pct``: false FAILs (real and simulated pairs) and detection of
  injected regressions for a range of floors.
- ``fpr``: simulated pure-noise comparisons through the same estimators and decision: the real rate
  of comparisons with any kernel flagged, against the policy's ``fpr``.
- ``history``: 40-commit per-kernel level histories with the A/A pair's run-to-run noise per kernel
  (numeric, 200 trials): +3% and +5% steps located exactly, a creep of five +1% steps with its
  cumulative size, false steps in noise-only histories.
- ``e2e``: one generated 40-commit store (``kbase.synth.history``: git repository, exports, snapshots)
  with a +3% and a +5% step and a five-step +1% creep, through ``kbase.steps``; and a noise-only one.
- ``gatehist``: the gate with history noise on generated stores: +3% / +5% at the newest commit after
  6, 11 and 21 past baselines, and a 60-commit noise-only history gated commit by commit.
- ``step``: the step rule (``benchmarks/calibrate_step.py``): false alarms on real and simulated A/A pairs and
  its power on real (4 -> 0 DataLoader workers) and simulated (slower host) step changes, beside the kernels'.
- ``fixedwork``: A/A pairs of generated captures without iteration markers (fixed work: a trending Gaussian
  elimination, a window-filling stencil, a one-launch solver, a mixed program) gated, beside A/A pairs of
  iteration-marked ones: false FAILs, pairs with a kernel flagged, kernels called "cannot judge", and +5% /
  +10% found (``benchmarks/fixed_work_aa.py``; at no and at 0.3% per-process noise).
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
from pathlib import Path

import numpy as np
from calibrate_common import DETECTED, KINETO, TEST_DATA, calibration_settings, flagged_kernels, fresh_sets
from calibrate_history import e2e, fpr, gatehist, history
from calibrate_simulated import floor, simfresh

import kbase
from kbase.comparison.diff import compute_diff
from kbase.comparison.side import side_from_leaderboards


def _aa_gate(x: Path | str, y: Path | str, s: kbase.Settings) -> tuple[list[str], str, int, list[str]]:
    """One A/A comparison gated: (kernels flagged, gate status, kernels compared, noise and swap notes)."""
    g = kbase.gate(str(x), str(y), s)
    result = g.comparison.result
    return (flagged_kernels(result.rows), g.verdict.status.value, len(result.rows),
            [n[:120] for n in result.notes if n.startswith(("noise", "algorithm swap"))])


def aa(data: Path) -> dict:
    s = calibration_settings()
    a, b = (data / KINETO.format(x) for x in "ab")
    out = {}
    for x, y, label in ((a, b, "a->b"), (b, a, "b->a")):
        names, status, kernels, notes = _aa_gate(x, y, s)
        out[label] = (len(names), status)
        print(f"A/A {label}: {len(names)} kernels flagged of {kernels}; gate {status}; {notes}")
    return out


def inject(data: Path) -> dict:
    return inject_pair(data / KINETO.format("a"), data / KINETO.format("b"))


def injectswap(data: Path) -> dict:
    """``inject`` into the 4-worker capture of a workers0/workers4 pair: its convolutions are an algorithm
    swap, judged by op; a regression in one of their kernels must still fail the gate at the floor."""
    return inject_pair(TEST_DATA / "v100_resnet50_w0_jan2021.pt.trace.json.gz",
                       TEST_DATA / "v100_resnet50_w4_jan2021.pt.trace.json.gz", effects=(0.05, 0.10, 0.20))


def inject_pair(first: Path, second: Path, effects: tuple[float, ...] = (0.02, 0.03, 0.05, 0.10)) -> dict:
    """The ``inject`` table for two captures of one configuration (slowdowns go into the second); then the
    gate on each injection: FAIL where the injected effect on the iteration is >= ``min_effect_pct``."""
    from kbase.comparison.gate import decide

    s = calibration_settings()
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
    floor = s.policy.min_effect_pct / 100
    gates: list[tuple[float, bool, str]] = []  # (injected effect, gate failed, what failed)
    print(f"\n{first.name} -> {second.name} (+x% injected into the second; floor min_effect_pct "
          f"{s.policy.min_effect_pct}%)")
    print("\n| effect | share | kernels | flagged | of which below gate floor | ranked first | other kernels flagged | "
          "missed (share, MDE, source) |")
    print("|---|---|---|---|---|---|---|---|")
    for f in effects:
        for lo in (0.01, 0.05):
            names = list(share[share >= lo].index)
            hit = first = other = below = 0
            missed = []
            for name in names:
                m = codes == cats.index(name)
                end = end0.copy()
                end[m] = start[m] + np.rint((end0[m] - start[m]) * (1 + f)).astype(end0.dtype)
                k.end = end
                after = side_from_leaderboards([kbase.leaderboard(kbase.window(prof["b"], s), sketches=True)], "b")
                k.end = end0
                result = compute_diff(before, after, s.policy)
                rows = result.rows
                flagged = set(rows.loc[rows["class"].isin(DETECTED), "name"])
                ok = name in flagged
                hit += ok
                below += bool(ok and rows.loc[rows["name"] == name, "class"].iloc[0] == "regressed_below_floor")
                first += bool(ok and rows.iloc[0]["name"] == name)
                other += bool(set(flagged_kernels(rows)) - {name} - _swapped(rows))
                if not ok:
                    r = rows[rows["name"] == name].iloc[0]
                    missed.append(f"{r['short_name']} ({share[name]:.1%}, MDE {r['mde_rel']:.1%}, {r['noise_source']})")
                if lo == 0.01:
                    v = decide(result)
                    gates.append((f * share[name], v.code == 1, ", ".join(x.short_name[:40] for x in v.failing)))
            results[(f, lo)] = (hit, len(names))
            print(f"| +{f:.0%} | >= {lo:.0%} | {len(names)} | {hit}/{len(names)} | {below} | {first} | {other} | "
                  f"{'; '.join(missed) or '-'} |")
    over = [g for g in gates if g[0] >= floor]
    under = [g for g in gates if g[0] < floor]
    print(f"gate: FAIL on {sum(g[1] for g in over)}/{len(over)} injections with effect >= {floor:.1%} of the "
          f"iteration (smallest {min((g[0] for g in over), default=float('nan')):.2%}); on "
          f"{sum(g[1] for g in under)}/{len(under)} below it")
    for e, failed, what in sorted(over)[:3]:
        print(f"  smallest over the floor: effect {e:.2%} -> {'FAIL: ' + what if failed else 'PASS'}")
    results["gate"] = (sum(g[1] for g in over), len(over), sum(g[1] for g in under), len(under))
    return results


def _swapped(rows) -> set[str]:
    """Kernels an algorithm swap covers (reported, not gated: their flags are the swap's, not an injection's)."""
    return set(rows.loc[rows["swap"], "name"])


def repeats(paths: list[Path]) -> dict:
    """Every ordered pair of repeat captures of one configuration (every difference is noise): kernels
    flagged and gate verdicts; then the ``inject`` table on the first two."""
    s = calibration_settings()
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
    s = calibration_settings()
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
        print(f"nsys no markers, against itself: {len(flagged_kernels(same.comparison.result.rows))} flagged; gate "
              f"{same.verdict.status.value}")
        return {"slow": (r["class"], g.verdict.status.value), "same": same.verdict.status.value}


def workers(data: Path) -> dict:
    s = calibration_settings()
    a, b = (str(data / f"kineto/v100_resnet50_workers{n}.pt.trace.json.gz") for n in (0, 4))
    out = {}
    for x, y, label in ((a, b, "workers0 -> workers4"), (b, a, "workers4 -> workers0")):
        g = kbase.gate(x, y, s)
        swaps = [n for n in g.comparison.result.notes if n.startswith("algorithm swap")]
        rows = g.comparison.result.rows
        print(f"{label}: gate {g.verdict.status.value}; {len(flagged_kernels(rows))} kernels flagged "
              f"({int(rows['swap'].sum())} in the swap, not gated); swap reported: {bool(swaps)}")
        for n in swaps:
            print(f"  {n[:230]}")
        out[label] = {"status": g.verdict.status.value, "swap": bool(swaps)}
    return out


def _pair_verdicts(prof: dict[Path, object], x: Path, y: Path, s: kbase.Settings) -> dict[str, object]:
    """One ordered pair under the three rules: the default; min_effect_pct 0 (significance alone); and without
    op information (the library-swap rule of before, min_effect 0)."""
    import dataclasses

    from kbase.comparison.gate import decide

    sides = {}
    for p in (x, y):
        lb = kbase.leaderboard(kbase.window(prof[p], s), sketches=True)
        plain = kbase.leaderboard(kbase.window(prof[p], s), sketches=True, ops=False)
        sides[p] = (side_from_leaderboards([lb], p.name), side_from_leaderboards([plain], p.name))
    out: dict[str, object] = {}
    zero = dataclasses.replace(s.policy, min_effect_pct=0.0)
    for label, pol, k in (("default", s.policy, 0), ("min_effect 0", zero, 0), ("no ops, min_effect 0", zero, 1)):
        result = compute_diff(sides[x][k], sides[y][k], pol)
        v = decide(result)
        out[label] = v
        if label == "default":
            rows = result.rows
            out["swap"] = any(n.startswith("algorithm swap") for n in result.notes)
            sig = rows[rows["class"].isin(DETECTED) & ~rows["swap"] & ~rows["ignored"]]
            op_sig = [r for r in (result.ops.records() if result.ops else []) if r["reshuffled"]
                      and r["class"] in DETECTED and not r["ignored"]]
            out["largest"] = max([float(e) for e in sig["effect"]] + [r["effect"] for r in op_sig], default=0.0)
    return out


def fresh(data: Path) -> dict:
    """Real fresh-process pairs, gated: the Done-when line "every shared A/A pair, and workers0 vs workers4, gate
    PASS both ways, the swap still reported", on every such pair there is."""
    s = calibration_settings()
    out: dict = {}
    print("\nreal fresh-process pairs (every ordered pair within a configuration; FAILs of the gate):")
    print("\n| captures | ordered pairs | default rule | min_effect_pct 0 | without ops (library-swap rule) | "
          "swap reported | largest significant effect not in a swap |")
    print("|---|---|---|---|---|---|---|")
    for label, files in fresh_sets(data).items():
        if not all(f.is_file() for f in files):
            print(f"| {label} | - | (captures missing) | | | | |")
            continue
        prof = {f: kbase.read(f, s) for f in files}
        fails = {"default": 0, "min_effect 0": 0, "no ops, min_effect 0": 0}
        swaps = pairs = 0
        largest = 0.0
        for x, y in itertools.permutations(files, 2):
            got = _pair_verdicts(prof, x, y, s)
            pairs += 1
            for k in fails:
                fails[k] += got[k].code == 1  # type: ignore[attr-defined]
            swaps += bool(got["swap"])
            largest = max(largest, float(got["largest"]))  # type: ignore[arg-type]
            if got["default"].code == 1:  # type: ignore[attr-defined]
                print(f"  FAIL {x.name} -> {y.name}: {[f.short_name for f in got['default'].failing]}")  # type: ignore
        out[label] = (pairs, fails, swaps, largest)
        print(f"| {label} | {pairs} | {fails['default']} FAIL | {fails['min_effect 0']} FAIL | "
              f"{fails['no ops, min_effect 0']} FAIL | {swaps}/{pairs} | {largest:+.2%} |")
    out["history"] = fresh_history(fresh_sets(data)["June 2021 (4 processes)"], s)
    return out


def fresh_history(files: list[Path], s: kbase.Settings) -> dict:
    """Each ordered pair of ``files`` with the other captures stored before it as the base line's history (a
    git repository, one commit each): the gate as CI runs it. With 4 captures the history holds 2 (under
    ``min_history`` 5: the stated fallback); with ``min_history`` 2 they are used."""
    import dataclasses

    import git

    out = {}
    for min_history in (s.policy.min_history, 2):
        fails = pairs = 0
        sources: set[str] = set()
        for x, y in itertools.permutations(files, 2):
            with tempfile.TemporaryDirectory() as tmp:
                repo = git.Repo.init(Path(tmp) / "repo", initial_branch="main")
                actor = git.Actor("calibrate", "calibrate@kbase.invalid")
                settings = kbase.Settings.load(repo=Path(tmp) / "repo", db=f"sqlite:///{tmp}/s.db", name="fresh")
                settings = dataclasses.replace(settings, policy=dataclasses.replace(settings.policy,
                                                                                    min_history=min_history))
                shas = []
                for i, f in enumerate([*[f for f in files if f not in (x, y)], x, y]):
                    (Path(tmp) / "repo" / "v.txt").write_text(str(i))
                    repo.index.add(["v.txt"])
                    shas.append(repo.index.commit(f"c{i}", author=actor, committer=actor).hexsha)
                    kbase.snapshot(f, settings, rev=shas[-1])
                g = kbase.gate(shas[-2], shas[-1], settings)
                fails += g.verdict.code == 1
                pairs += 1
                sources |= {n.split(":")[0] for n in g.comparison.result.notes if "noise" in n}
                sources |= {n[:60] for n in g.comparison.result.notes if n.startswith("between-process")}
        print(f"  June 2021, the other captures as history (min_history {min_history}): {fails}/{pairs} gates FAIL; "
              f"{sorted(sources)}")
        out[min_history] = (fails, pairs)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    ap.add_argument("--only", default="aa,inject,injectswap,nsys,workers,fresh,simfresh,floor,fpr,history,e2e,"
                                      "gatehist,fixedwork,step")
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
    for name, fn in (("aa", aa), ("inject", inject), ("injectswap", injectswap), ("nsys", nsys),
                     ("workers", workers), ("fresh", fresh)):
        if name in only and have:
            fn(args.data)
    if "simfresh" in only:
        simfresh()
    if "floor" in only:
        floor(args.data if have else None)
    if "fpr" in only:
        fpr()
    if "history" in only:
        history(args.data if have else None)
    if "e2e" in only:
        e2e()
    if "gatehist" in only:
        gatehist()
    if "fixedwork" in only:
        from fixed_work_aa import fixed_work

        for run_sd in (0.0, 0.003):
            fixed_work(run_sd=run_sd)
    if "step" in only:
        from calibrate_step import calibrate as calibrate_step

        calibrate_step(args.data if have else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
