"""The figures ``hta_compare.py`` collects (HTA's temporal breakdown and kbase's budget per trace) and the tables
it prints from them: each tool's shares, the difference taken apart step by step, the summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench_common import REPO, Run

TOLERANCE_PP = 0.5
SHARES = ("idle", "compute", "non_compute")


@dataclass
class Breakdown:
    """One tool's figures for one trace: span (the denominator) and the three blocks, in ns, summed over GPUs."""

    label: str
    span_ns: float = 0.0
    idle_ns: float = 0.0
    compute_ns: float = 0.0
    non_compute_ns: float = 0.0
    n_gpus: int = 0
    run: Run | None = None
    error: str = ""
    note: str = ""

    def share(self, block: str) -> float:
        return 100.0 * getattr(self, f"{block}_ns") / self.span_ns if self.span_ns else float("nan")


@dataclass
class TraceResult:
    path: Path
    rows: dict[str, Breakdown] = field(default_factory=dict)

    def diff(self, a: str = "kbase", b: str = "hta") -> dict[str, float]:
        x, y = self.rows.get(a), self.rows.get(b)
        if x is None or y is None or x.error or y.error:
            return {}
        return {s: x.share(s) - y.share(s) for s in SHARES}


LABELS = {
    "hta": "HTA 0.5.0 get_temporal_breakdown()",
    "kbase": "kbase budget --window all",
    "kbase_hta_classes": "kbase, HTA's kernel classes",
    "kbase_hta_events": "kbase, HTA's classes and activities",
    "hta_whole": "HTA, last step kept, no us rounding",
    "hta_last": "HTA, last step kept",
}
# kbase - HTA taken apart, kbase's side to HTA's default: the steps add up to the headline difference
STEPS = (("kernel classes", "kbase", "kbase_hta_classes"),
         ("activities HTA leaves out", "kbase_hta_classes", "kbase_hta_events"),
         ("the sweeps on the same input", "kbase_hta_events", "hta_whole"),
         ("HTA's us rounding", "hta_whole", "hta_last"),
         ("HTA leaves out the last step", "hta_last", "hta"))


def _row(b: Breakdown) -> str:
    name = LABELS[b.label]
    if b.error:
        return f"  {name:<38} FAILED: {b.error[:140]}"
    r = b.run
    cost = f"{r.wall_s:7.2f} {r.cpu_s:7.2f} {r.maxrss_bytes / 2**20:8.0f}" if r else ""
    return (f"  {name:<38} {b.span_ns / 1e6:11.3f} {b.share('idle'):7.2f} {b.share('compute'):9.2f} "
            f"{b.share('non_compute'):13.2f}   {cost}")


def _diff_row(name: str, d: dict[str, float]) -> str:
    if not d:
        return f"  {name:<38} (not comparable: a run failed)"
    worst = max(abs(v) for v in d.values())
    flag = f"  EXCEEDS {TOLERANCE_PP} pp" if worst > TOLERANCE_PP else ""
    return f"  {name:<38} {'':11} {d['idle']:+7.2f} {d['compute']:+9.2f} {d['non_compute']:+13.2f}{flag}"


def print_trace(t: TraceResult) -> None:
    n = max((b.n_gpus for b in t.rows.values()), default=0)
    where = "tests/data/kineto" if t.path.is_relative_to(REPO) else "shared/data/kineto"
    print(f"\n{where}/{t.path.name}  ({n} GPU(s))")
    print(f"  {'':<38} {'span ms':>11} {'idle %':>7} {'compute %':>9} {'non-compute %':>13}   "
          f"{'wall s':>7} {'CPU s':>7} {'RSS MiB':>8}")
    for key in ("hta", "kbase"):
        print(_row(t.rows[key]))
    print(_diff_row("kbase - HTA (pp)", t.diff()))
    if "hta_whole" in t.rows:
        for key in ("kbase_hta_classes", "kbase_hta_events", "hta_whole", "hta_last"):
            print(_row(t.rows[key]))
        print("  kbase - HTA, step by step (pp):")
        for name, a, b in STEPS:
            print(_diff_row("  " + name, t.diff(a, b)))
    notes = [(LABELS[k], t.rows[k].note) for k in ("hta", "kbase", "kbase_hta_events") if t.rows.get(k)]
    for label, note in notes:
        if note:
            print(f"  {label}: {note}")


def print_summary(results: list[TraceResult]) -> None:
    print(f"\nSummary (percentage points, tolerance {TOLERANCE_PP} pp): kbase budget --window all - HTA's temporal "
          "breakdown; 'same input': kbase's sweep with HTA's classes and activities - HTA's with its last step and ns")
    print(f"  {'trace':<44} {'idle':>6} {'compute':>7} {'non-c':>6}  {'same input':>10}  {'wall s HTA':>10} "
          f"{'kbase':>5} {'CPU s HTA':>9} {'kbase':>5} {'MiB HTA':>7} {'kbase':>5}  verdict")
    within = same = explained = 0
    for t in results:
        d, e = t.diff(), t.diff("kbase_hta_events", "hta_whole")
        h, k = t.rows["hta"].run, t.rows["kbase"].run
        nan = float("nan")
        cost = (f"{h.wall_s if h else nan:10.2f} {k.wall_s if k else nan:5.2f} {h.cpu_s if h else nan:9.2f} "
                f"{k.cpu_s if k else nan:5.2f} {h.maxrss_bytes / 2**20 if h else nan:7.0f} "
                f"{k.maxrss_bytes / 2**20 if k else nan:5.0f}")
        worst_e = f"{max(abs(v) for v in e.values()):10.2f}" if e else f"{'-':>10}"
        same += bool(e) and max(abs(v) for v in e.values()) <= TOLERANCE_PP
        explained += bool(e)
        if not d:
            failed = "HTA failed" if t.rows["hta"].error else "kbase FAILED"
            print(f"  {t.path.name[:44]:<44} {'':6} {'':7} {'':6}  {worst_e}  {cost}  {failed}")
            continue
        ok = max(abs(v) for v in d.values()) <= TOLERANCE_PP
        within += ok
        print(f"  {t.path.name[:44]:<44} {d['idle']:+6.2f} {d['compute']:+7.2f} {d['non_compute']:+6.2f}  "
              f"{worst_e}  {cost}  {'within' if ok else 'EXCEEDS ' + str(TOLERANCE_PP) + ' pp'}")
    print(f"  {within} of {len(results)} traces within {TOLERANCE_PP} pp of HTA's defaults on all three shares"
          + (f"; {same} of {explained} on the same input" if explained else "")
          + " (docs/budget.md, 'Beside HTA's temporal breakdown')")


# ------------------------------------------------------------------------------------------ main
