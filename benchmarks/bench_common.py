"""Helpers shared by the benchmark scenarios: running a command as a fresh child process (wall time,
CPU time, peak RSS), medians, cached inputs, and the result table."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

GIB = 1 << 30
N_GPUS, ITERATIONS, DISTINCT = 8, 100, 2000  # generated exports: GPUs, iterations, distinct kernel names
FLOOR_SQL = ("SELECT demangledName, count(*), sum(end-start) FROM CUPTI_ACTIVITY_KIND_KERNEL "
             "GROUP BY demangledName")


# --------------------------------------------------------------------------- running children


@dataclass
class Run:
    wall_s: float
    maxrss_bytes: int
    rc: int
    cpu_s: float = float("nan")  # user + system CPU of the child, all its threads (wait4 rusage)


def loadavg() -> str:
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f}"


def kbase_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "kbase"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kbase.cli"]


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KBASE_DB", "KBASE_DEBUG")}
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("COLUMNS", "200")
    return env


def run_child(cmd: list[str], cwd: Path, ok_codes=(0,), stdout_path: Path | None = None,
              env: dict[str, str] | None = None) -> Run:
    """Run one command as a fresh process; wall time, and its own CPU time and peak RSS (wait4 rusage)."""
    err_path = cwd / ".bench-stderr"
    with open(err_path, "wb") as err, open(stdout_path or os.devnull, "wb") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env={**child_env(), **(env or {})})
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = rc = os.waitstatus_to_exitcode(status)
    if rc not in ok_codes:
        tail = err_path.read_text(errors="replace")[-2000:]
        raise SystemExit(f"benchmark: {' '.join(map(str, cmd))} exited {rc}\n{tail}")
    return Run(wall, usage.ru_maxrss * 1024, rc, usage.ru_utime + usage.ru_stime)  # ru_maxrss: KiB on Linux


class OneCoreBusy:
    """A spinning child process for the duration of a ``with`` block: one core busy, as on a CI runner running
    other jobs (issue 41: CPU is measured so). On such a runner kbase's reader takes one thread
    (``kbase.readers.threads``), and both sides of a pair pay the same sharing of caches and memory bandwidth."""

    def __enter__(self) -> OneCoreBusy:
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"], stdin=subprocess.DEVNULL)
        time.sleep(0.2)  # running (and counted in /proc/loadavg's runnable tasks) before the first pair
        return self

    def __exit__(self, *exc) -> None:
        self.proc.kill()
        self.proc.wait()


def med(xs) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


CPU_X = 1.3  # CPU seconds against the floor's: a wall-clock ratio that holds on a runner whose cores are busy


def add_cpu_ratio(res: Results, scenario: str, label: str, floor: list[Run], kbase: list[Run],
                  target: bool = True, note: str = "") -> list[float]:
    """The row of kbase's CPU seconds (user + system, every thread) against the floor's, pairwise like the
    wall ratios: on idle cores a second thread shortens kbase's wall time; on a loaded runner it does not."""
    ratio = [k.cpu_s / f.cpu_s for f, k in zip(floor, kbase)]
    res.add(scenario, f"{label}: CPU ratio to the floor (user+sys, pairwise)", med(ratio), "x", len(ratio),
            f"<= {CPU_X}x" if target else "", (med(ratio) <= CPU_X) if target else None, best=min(ratio),
            note=f"kbase {med([r.cpu_s for r in kbase]):.3f} s CPU, floor {med([r.cpu_s for r in floor]):.3f} s CPU"
            + (f"; {note}" if note else ""))
    return ratio


# --------------------------------------------------------------------------- cached inputs


def source_hash(*paths: Path) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def fresh(sidecar: Path, want: dict) -> bool:
    try:
        return json.loads(sidecar.read_text()) == want
    except (OSError, ValueError):
        return False


def ensure_export(out: Path, n_kernels: int, seed: int, log) -> Path:
    """A generated 8-GPU, 100-iteration, 2,000-name export of about ``n_kernels`` kernels (cached)."""
    from kbase.synth.generate import ExportSpec, generate_export, scaled_kernel_mix

    per_iter = n_kernels // (N_GPUS * ITERATIONS)
    path = out / f"export_{n_kernels}_g{N_GPUS}_i{ITERATIONS}_k{DISTINCT}_s{seed}.sqlite"
    want = {"n_gpus": N_GPUS, "iterations": ITERATIONS, "distinct": DISTINCT, "per_iter": per_iter,
            "seed": seed,
            "generator": source_hash(*(REPO / "kbase" / "synth" / f
                                       for f in ("generate.py", "names.py", "nsys_schema.py", "timing.py")))}
    side = path.with_suffix(".json")
    if path.exists() and fresh(side, want):
        return path
    log(f"  generating {path.name} ...")
    t0 = time.perf_counter()
    truth = generate_export(path, ExportSpec(n_gpus=N_GPUS, iterations=ITERATIONS,
                                             kernels=scaled_kernel_mix(DISTINCT, per_iter), seed=seed),
                            overwrite=True)
    log(f"  generated {truth.n_kernels:,} kernels, {path.stat().st_size / 1e6:.0f} MB in "
        f"{time.perf_counter() - t0:.0f} s")
    side.write_text(json.dumps(want))
    return path


def rm_store(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", ".migrate-lock"):
        Path(str(path) + suffix).unlink(missing_ok=True)


def rev_of(i: int) -> str:
    return hashlib.sha1(f"kbase-bench-{i}".encode()).hexdigest()


# --------------------------------------------------------------------------- results


@dataclass
class Row:
    scenario: str
    metric: str
    value: float
    unit: str
    runs: int = 0
    target: str = ""
    met: bool | None = None
    note: str = ""
    best: float | None = None  # the fastest run: on a shared machine, the least disturbed one


@dataclass
class Results:
    rows: list[Row] = field(default_factory=list)
    raw: dict = field(default_factory=dict)

    def add(self, *args, **kw) -> Row:
        r = Row(*args, **kw)
        self.rows.append(r)
        return r


def fmt_value(r: Row) -> str:
    if r.unit == "s":
        return f"{r.value:.3f} s"
    if r.unit == "x":
        return f"{r.value:.2f}x"
    if r.unit == "MiB":
        return f"{r.value:,.0f} MiB"
    if r.unit == "KiB":
        return f"{r.value:,.1f} KiB"
    if r.unit == "ms":
        return f"{r.value:,.1f} ms"
    return f"{r.value:g} {r.unit}"


def print_table(res: Results, header: str) -> str:
    lines = [header]
    w = [8, 60, 12, 10, 4, 11, 4]
    head = ["scenario", "metric", "median", "min", "runs", "target", "met"]
    lines.append("  ".join(h.ljust(x) for h, x in zip(head, w)) + "  note")
    lines.append("-" * (sum(w) + 2 * len(w) + 30))
    for r in res.rows:
        met = "" if r.met is None else ("yes" if r.met else "NO")
        best = fmt_value(Row(r.scenario, r.metric, r.best, r.unit)) if r.best is not None else ""
        cells = [r.scenario, r.metric, fmt_value(r), best, str(r.runs or ""), r.target, met]
        lines.append("  ".join(c.ljust(x) for c, x in zip(cells, w)) + ("  " + r.note if r.note else ""))
    text = "\n".join(lines)
    print(text, flush=True)
    return text


def markdown_table(res: Results) -> str:
    """The table as Markdown (docs/performance.md's table is pasted from it)."""
    out = ["| | what | median | min | runs | target | met | reference / note |", "|---|---|---|---|---|---|---|---|"]
    for r in res.rows:
        met = "" if r.met is None else ("yes" if r.met else "**no**")
        best = fmt_value(Row(r.scenario, r.metric, r.best, r.unit)) if r.best is not None else ""
        out.append(f"| {r.scenario} | {r.metric.strip()} | {fmt_value(r)} | {best} | {r.runs or ''} | {r.target} | "
                   f"{met} | {r.note} |")
    return "\n".join(out)


def build_in_child(module: str, func: str, **kwargs) -> Path:
    """``module.func(**kwargs, log=print)`` in a child Python; returns the path it returns.

    Inputs are built in a child so the benchmark process stays small: on Linux a forked child starts
    with its parent's peak RSS as its own ``ru_maxrss``, so a parent that once held a 10M-row build
    would inflate every peak RSS measured after it."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); m = __import__(sys.argv[2]); "
            "p = getattr(m, sys.argv[3])(**{k: (__import__('pathlib').Path(v) if k == 'out' else v) "
            "for k, v in json.loads(sys.argv[4]).items()}, log=print); print('BUILT', p)")
    args = {k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items()}
    proc = subprocess.run([sys.executable, "-c", code, str(Path(__file__).resolve().parent), module, func,
                           json.dumps(args)], capture_output=True, text=True, env=child_env())
    sys.stderr.write("".join(line + "\n" for line in proc.stdout.splitlines() if not line.startswith("BUILT ")))
    if proc.returncode != 0:
        raise SystemExit(f"benchmark: building {func}({args}) failed\n{proc.stderr[-3000:]}")
    return Path(proc.stdout.rsplit("BUILT ", 1)[1].strip())


def timed_pairs(out: Path, cmds: dict[str, list[str]], runs: int, ok_codes=(0,), warm_up: bool = True
                ) -> dict[str, list[Run]]:
    """One untimed warm-up each (unless not ``warm_up``), then ``runs`` rounds, the commands alternating within a
    round."""
    for cmd in cmds.values() if warm_up else ():
        run_child(cmd, out, ok_codes)
    got: dict[str, list[Run]] = {k: [] for k in cmds}
    for _ in range(runs):
        for k, cmd in cmds.items():
            got[k].append(run_child(cmd, out, ok_codes))
    return got


