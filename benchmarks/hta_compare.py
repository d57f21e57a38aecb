"""kbase's GPU time budget beside Holistic Trace Analysis' temporal breakdown (docs/budget.md).

For every Kineto trace in ``../shared/data/kineto`` (or ``$KBASE_BENCH_SHARED/data/kineto``) and
``tests/data/kineto``, each in a **fresh child process**:

* HTA 0.5.0: ``TraceAnalysis(trace_dir=D).get_temporal_breakdown(visualize=False)``, ``D`` a temporary folder
  holding a link to the one trace (HTA reads every ``.json`` / ``.json.gz`` of a folder as one job's ranks, the
  rank from the file's ``distributedInfo``, 0 where it has none);
* ``kbase budget TRACE --window all --format json`` (each GPU's first activity to its last, as HTA's span).

and prints idle, compute and non-compute shares side by side (HTA's non-compute is its span's busy time outside
compute kernels: kbase's exposed communication + exposed memory), their differences in percentage points, and
each tool's wall time, CPU time and peak RSS. Traces whose shares differ by more than 0.5 pp are named.

Unless ``--no-explain``, three more children per trace take the difference apart, step by step (the steps add
up to the headline difference):

* kbase's budget (``kbase.analysis.budget.compute_budget(..., whole=True)``) with HTA's kernel classes
  (``hta.utils.utils.get_kernel_type``: only ``nccl*Kernel`` is communication, only ``Memcpy*``/``Memset*``/``dma*``
  memory, names with ``Sync`` or an inner ``Memcpy`` "other"; copy and fill kernels are compute), over every
  activity, then over only the activities HTA keeps (launched by a host call in the capture, by the end of the
  last ``ProfilerStep``);
* HTA with ``include_last_profiler_step=True`` (by default HTA drops the GPU work launched from the last
  ``ProfilerStep``'s start on), with and without ``HTA_DISABLE_NS_ROUNDING=1`` (by default HTA rounds every event
  of a nanosecond trace inward to whole microseconds).

"the sweeps on the same input" (kbase's sweep with HTA's classes and activities against HTA's with its last step
and nanoseconds kept) is the check of the arithmetic itself: 0.00 pp on every trace HTA can read.

Not a runtime dependency: ``pip install -e ".[bench]"`` (HTA pulls pandas, plotly, ...), or point ``--hta-python``
at an interpreter that has ``holistictraceanalysis==0.5.0``. Exit status: 0 whatever the differences (it prints
figures), also where HTA fails on a trace (printed with HTA's exception: a finding about the reference); 1 when
kbase crashed on a trace or HTA ran on none; 2 when HTA is not installed or kbase has no ``budget`` command.

    .venv/bin/python benchmarks/hta_compare.py [--no-explain] [--only SUBSTRING] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import REPO, Run, child_env, kbase_cmd, loadavg, run_child  # noqa: E402
from hta_tables import SHARES, TOLERANCE_PP, Breakdown, TraceResult, print_summary, print_trace  # noqa: E402

# HTA's temporal breakdown in a child: its raw microsecond columns (its *_pctg columns are rounded to 0.01).
HTA_CHILD = """
import json, sys
from hta.trace_analysis import TraceAnalysis
ta = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=sys.argv[2] == "1")
df = ta.get_temporal_breakdown(visualize=False)
cols = ["rank", "idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)"]
print(json.dumps([{k: float(r[k]) for k in cols} for _, r in df[cols].iterrows()]))
"""

# kbase's budget of the whole capture per GPU from the library (as ``kbase budget --window all``), with HTA's own
# get_kernel_type classes: one of every GPU activity ("hta_classes") and one of only the activities HTA 0.5.0 keeps
# with include_last_profiler_step=True
# ("hta_events": launched by a host call in the capture that started by the end of the last ProfilerStep;
# Trace._filter_irrelevant_gpu_kernels, which filters only where the capture names two steps or more).
BUDGET_CHILD = """
import json, sys
from dataclasses import replace
from pathlib import Path
import numpy as np
from kbase.analysis.budget import COMMUNICATION, COMPUTE, FIELDS, MEMORY, compute_budget
from kbase.analysis.spec import WindowSpec
from kbase.analysis.window import select_window
from kbase.readers.kineto import read_kineto

def budget(p, cat):
    b = compute_budget(select_window(p, WindowSpec()), np.array(cat, dtype=np.int8), whole=True)
    gpus = [{"gpu": g.gpu, "rank": g.rank, **{f: getattr(g.blocks, f) for f in FIELDS}} for g in b.gpus]
    return {"schema": "kbase.budget/1", "unit": b.unit, "gpus": gpus, "total": {f: getattr(b.total, f) for f in FIELDS}}

p = read_kineto(Path(sys.argv[1]))
names = p.columns.names.tolist()
from hta.utils.utils import get_kernel_type
code = {"COMMUNICATION": COMMUNICATION, "MEMORY": MEMORY}
cat = [code.get(get_kernel_type(n), COMPUTE) for n in names]
out = {"hta_classes": budget(p, cat)}
r = p.range_columns
steps = np.array(["ProfilerStep" in str(n) for n in r.name], dtype=bool)
k, a = p.columns, p.activities
if len(set(r.name[steps].tolist())) >= 2:
    last_end = int(r.end[steps].max())
    kk = (k.launch_start >= 0) & (k.launch_start <= last_end)
    ka = (a.launch_start >= 0) & (a.launch_start <= last_end)
    cols = replace(k, **{f: getattr(k, f)[kk] for f in ("start", "end", "gpu", "name", "launch_tid", "launch_start")})
    acts = replace(a, **{f: getattr(a, f)[ka] for f in ("start", "end", "gpu", "kind", "launch_start", "launch_tid")})
    p = replace(p, columns=cols, activities=acts)
    out["dropped"] = {"kernels": int((~kk).sum()), "activities": int((~ka).sum())}
else:
    out["dropped"] = {"kernels": 0, "activities": 0}
out["hta_events"] = budget(p, cat)
print(json.dumps(out))
"""


# ------------------------------------------------------------------------------------------ children


def _child(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> tuple[Run | None, str, str]:
    """(run, stdout, error): a crash is reported, not raised, so the other traces still run."""
    out = cwd / ".child-stdout"
    try:
        run = run_child(cmd, cwd, stdout_path=out, env=env)
    except SystemExit as e:  # run_child's report of a non-zero exit, with the stderr tail: keep its last line
        lines = [x.strip() for x in str(e).splitlines() if x.strip(" ^~\t")]  # not the traceback's carets
        if len(lines) >= 2 and ":" not in lines[-1]:  # a bare exception name: say where (the failed assert)
            return None, "", f"{lines[-1]} at {lines[-2]}"
        return None, "", lines[-1] if lines else "exited non-zero"
    return run, out.read_text(), ""


def kbase_has_budget() -> bool:
    proc = subprocess.run([*kbase_cmd(), "budget", "--help"], capture_output=True, text=True, env=child_env())
    return proc.returncode == 0


# HTA 0.5.0 reads a trace file as a JSON object ({"traceEvents": [...], ...}); PyTorch 1.7-1.8 wrote a bare list of
# events. Such a trace is given to HTA as the same events in an object (in a child, before HTA's timed run).
WRAP_CHILD = """
import gzip, json, sys
events = json.load(gzip.open(sys.argv[1], "rt"))
with gzip.open(sys.argv[2], "wt") as f:
    json.dump({"traceEvents": events}, f)
"""

HTA_VARIANTS = {  # label: (include_last_profiler_step, HTA_DISABLE_NS_ROUNDING)
    "hta": (False, False),  # HTA's defaults
    "hta_last": (True, False),
    "hta_whole": (True, True),
}


def hta_input(trace: Path, work: Path) -> tuple[Path, str]:
    """A folder holding the one trace as HTA reads it, and a note when it had to be wrapped."""
    d = work / "hta-ranks"
    if d.exists():
        return d, (work / "hta-ranks.note").read_text()
    d.mkdir()
    with gzip.open(trace, "rb") as f:
        bare_list = f.read(256).lstrip()[:1] == b"["
    note = ""
    if bare_list:
        dst = d / trace.name
        proc = subprocess.run([sys.executable, "-c", WRAP_CHILD, str(trace), str(dst)], capture_output=True)
        if proc.returncode != 0:
            raise SystemExit(f"benchmark: could not wrap {trace}: {proc.stderr.decode()[-500:]}")
        note = 'a bare JSON list of events, given to HTA as {"traceEvents": [...]}'
    else:
        (d / trace.name).symlink_to(trace.resolve())
    (work / "hta-ranks.note").write_text(note)
    return d, note


def run_hta(python: str, trace: Path, work: Path, label: str) -> Breakdown:
    include_last, no_rounding = HTA_VARIANTS[label]
    b = Breakdown(label)
    d, b.note = hta_input(trace, work)
    env = {"HTA_DISABLE_NS_ROUNDING": "1"} if no_rounding else {}
    run, out, err = _child([python, "-c", HTA_CHILD, str(d), "1" if include_last else "0"], work, env)
    b.run, b.error = run, err
    if err:
        return b
    rows = json.loads(out.strip().splitlines()[-1])
    b.n_gpus = len(rows)
    b.span_ns = 1e3 * sum(r["kernel_time(us)"] for r in rows)
    b.idle_ns = 1e3 * sum(r["idle_time(us)"] for r in rows)
    b.compute_ns = 1e3 * sum(r["compute_time(us)"] for r in rows)
    b.non_compute_ns = 1e3 * sum(r["non_compute_time(us)"] for r in rows)
    return b


def _from_budget(b: Breakdown, doc: dict) -> Breakdown:
    t = doc["total"]
    b.n_gpus = len(doc["gpus"])
    b.span_ns = t["window_ns"]
    b.idle_ns = t["idle_ns"]
    b.compute_ns = t["compute_ns"]
    b.non_compute_ns = t["communication_exposed_ns"] + t["memory_exposed_ns"]
    b.note = (f"comm exposed {t['communication_exposed_ns'] / 1e6:.3f} ms, memory exposed "
              f"{t['memory_exposed_ns'] / 1e6:.3f} ms")
    return b


def run_kbase(trace: Path, work: Path) -> Breakdown:
    b = Breakdown("kbase")
    cmd = [*kbase_cmd(), "budget", str(trace.resolve()), "--window", "all", "--format", "json"]
    run, out, err = _child(cmd, work)
    b.run, b.error = run, err
    return b if err else _from_budget(b, json.loads(out))


def run_kbase_hta_rules(trace: Path, work: Path) -> tuple[Breakdown, Breakdown]:
    """kbase's sweep with HTA's kernel classes: over every activity, and over only those HTA keeps."""
    classes, events = Breakdown("kbase_hta_classes"), Breakdown("kbase_hta_events")
    run, out, err = _child([sys.executable, "-c", BUDGET_CHILD, str(trace.resolve())], work)
    classes.run, classes.error, events.error = run, err, err
    if err:
        return classes, events
    doc = json.loads(out.strip().splitlines()[-1])
    _from_budget(classes, doc["hta_classes"])
    _from_budget(events, doc["hta_events"])
    events.note = (f"left out as HTA does: {doc['dropped']['kernels']} kernels, "
                   f"{doc['dropped']['activities']} memcpy/memset")
    return classes, events


# ------------------------------------------------------------------------------------------ printing

def find_traces(shared: Path | None, only: str | None) -> list[Path]:
    dirs = [REPO / "tests" / "data" / "kineto"]
    if shared is not None and (shared / "data" / "kineto").is_dir():
        dirs.insert(0, shared / "data" / "kineto")
    else:
        print(f"shared traces not found ({shared}/data/kineto): only tests/data/kineto is compared")
    out = [p for d in dirs for p in sorted(d.glob("*.json.gz"))]
    return [p for p in out if only is None or only in p.name]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shared", type=Path,
                    default=Path(os.environ.get("KBASE_BENCH_SHARED", REPO.parent / "shared")))
    ap.add_argument("--hta-python", default=sys.executable, help="an interpreter with holistictraceanalysis==0.5.0")
    ap.add_argument("--no-explain", action="store_true",
                    help="only HTA's default breakdown and kbase budget (not the two runs that split the difference)")
    ap.add_argument("--only", help="traces whose file name contains this")
    ap.add_argument("--json", type=Path, help="write every figure here")
    args = ap.parse_args(argv)

    version = "import hta, importlib.metadata as m; print(m.version('holistictraceanalysis'))"
    probe = subprocess.run([args.hta_python, "-c", version], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"HTA is not importable by {args.hta_python}: pip install -e '.[bench]' "
              "(holistictraceanalysis==0.5.0), or pass --hta-python")
        return 2
    hta_version = probe.stdout.strip()
    explain = not args.no_explain
    if explain and args.hta_python != sys.executable:
        probe = subprocess.run([sys.executable, "-c", "import hta"], capture_output=True)
        if probe.returncode != 0:
            print("--explain needs kbase and HTA in one interpreter: this one lacks HTA, so no explanation rows")
            explain = False
    if not kbase_has_budget():
        print(f"{' '.join(kbase_cmd())} has no budget command: this benchmark needs kbase with issue 36's budget")
        return 2
    traces = find_traces(args.shared.resolve(), args.only)
    print(f"HTA {hta_version} ({args.hta_python}); {' '.join(kbase_cmd())} budget TRACE --window all --format json; "
          f"{len(traces)} traces; load {loadavg()}")
    print("Every figure from a fresh child process; wall/CPU seconds and peak RSS are that child's.")
    results: list[TraceResult] = []
    for trace in traces:
        t = TraceResult(trace)
        with tempfile.TemporaryDirectory(prefix="hta-compare-") as tmp:
            work = Path(tmp)
            t.rows["hta"] = run_hta(args.hta_python, trace, work, "hta")
            t.rows["kbase"] = run_kbase(trace, work)
            if explain:
                t.rows["kbase_hta_classes"], t.rows["kbase_hta_events"] = run_kbase_hta_rules(trace, work)
                t.rows["hta_whole"] = run_hta(args.hta_python, trace, work, "hta_whole")
                t.rows["hta_last"] = run_hta(args.hta_python, trace, work, "hta_last")
        results.append(t)
        print_trace(t)
    print_summary(results)
    print(f"load {loadavg()}")
    if args.json:
        doc = {"hta_version": hta_version, "tolerance_pp": TOLERANCE_PP, "traces": [
            {"trace": str(t.path), "rows": {k: {"span_ns": b.span_ns, "idle_ns": b.idle_ns, "compute_ns": b.compute_ns,
                                                "non_compute_ns": b.non_compute_ns, "n_gpus": b.n_gpus,
                                                "shares_pct": {s: b.share(s) for s in SHARES},
                                                "wall_s": b.run.wall_s if b.run else None,
                                                "cpu_s": b.run.cpu_s if b.run else None,
                                                "maxrss_bytes": b.run.maxrss_bytes if b.run else None,
                                                "error": b.error}
                                            for k, b in t.rows.items()},
             "diff_pp": t.diff()} for t in results]}
        args.json.write_text(json.dumps(doc, indent=1))
    # kbase failing is the failure this benchmark exists to catch; HTA failing on a trace is a finding about the
    # reference (printed above), unless it never ran at all
    kbase_failed = [t.path.name for t in results for k, b in t.rows.items() if k.startswith("kbase") and b.error]
    hta_never = bool(results) and all(t.rows["hta"].error and t.rows.get("hta_whole", t.rows["hta"]).error
                                      for t in results)
    if kbase_failed:
        print(f"kbase FAILED on: {', '.join(sorted(set(kbase_failed)))}")
    if hta_never:
        print("HTA failed on every trace")
    return 1 if kbase_failed or hta_never else 0


if __name__ == "__main__":
    raise SystemExit(main())
