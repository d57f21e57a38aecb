"""S5 and S6: ``kbase top`` on the shared real exports against nsys-ai, and at 1M kernels against the
sqlite3 floor; ``kbase top`` of a file already stored at the current commit (answered from the store).

nsys-ai: set ``KBASE_BENCH_NSYS_AI`` to the Python of an environment where ``nsys-ai`` is installed
(``python -m venv V && V/bin/pip install nsys-ai==0.3.0``), or have ``nsys-ai`` on PATH. It runs on a
fresh copy of the export each time (cold: no cache beside it — and nsys-ai writes indexes into the
export it opens, so it must never see the shared original).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from bench_common import (
    FLOOR_SQL,
    REPO,
    Results,
    Run,
    add_cpu_ratio,
    build_in_child,
    kbase_cmd,
    loadavg,
    med,
    run_child,
)

SHARED_NSYS = Path(os.environ.get("KBASE_BENCH_SHARED") or REPO.parent / "shared") / "data" / "nsys"
TOP_S = 0.5  # kbase top on a small real export
TOP_FLOOR_X = 1.5  # kbase top at 1M kernels against the sqlite3 GROUP BY floor
WRAPPER = Path(__file__).resolve().parent / "nsys_ai_cold.py"


def nsys_ai_python() -> str | None:
    py = os.environ.get("KBASE_BENCH_NSYS_AI")
    if py:
        return py
    exe = shutil.which("nsys-ai")
    if exe is None:
        return None
    first = Path(exe).read_text(errors="replace").splitlines()[0]
    return first[2:].strip() if first.startswith("#!") else None


def nsys_ai_version(py: str) -> str | None:
    try:
        out = subprocess.run([py, "-c", "import importlib.metadata as m; print(m.version('nsys-ai'))"],
                             capture_output=True, text=True, timeout=60)
    except OSError:
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _fresh_copy(src: Path, work: Path) -> Path:
    """A new copy of ``src`` with nothing of nsys-ai's beside it (untimed)."""
    work.mkdir(parents=True, exist_ok=True)
    for p in work.iterdir():
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
    dst = work / src.name
    shutil.copyfile(src, dst)
    return dst


def _nsys_ai_top(py: str, src: Path, out: Path) -> Run:
    copy = _fresh_copy(src, out / "nsys_ai_work")
    return run_child([py, str(WRAPPER), "skill", "run", "top_kernels", str(copy)], out)


def s5_real_exports(out: Path, res: Results, log, runs: int = 5) -> None:
    exports = sorted(SHARED_NSYS.glob("*.sqlite")) if SHARED_NSYS.is_dir() else []
    if not exports:
        res.add("S5", "kbase top on the shared real exports", float("nan"), "s", 0, note=f"no exports in {SHARED_NSYS}")
        return
    py = nsys_ai_python()
    version = nsys_ai_version(py) if py else None
    ref_name = f"nsys-ai {version} cold" if version else "nsys-ai (not installed)"
    log(f"S5 kbase top on {len(exports)} real exports vs {ref_name}: {runs} pairs each  load {loadavg()}")
    raw = {}
    for src in exports:
        kb = [*kbase_cmd(), "top", str(src)]
        run_child(kb, out)  # warm-up (page cache, .pyc)
        if version:
            _nsys_ai_top(py, src, out)
        k_runs, n_runs, ratio = [], [], []
        for _ in range(runs):
            if version:
                n_runs.append(_nsys_ai_top(py, src, out))
            k_runs.append(run_child(kb, out))
            if version:
                ratio.append(k_runs[-1].wall_s / n_runs[-1].wall_s)
        v = med([r.wall_s for r in k_runs])
        note = f"{ref_name} {med([r.wall_s for r in n_runs]):.3f} s" if version else ref_name
        res.add("S5", f"kbase top {src.name}", v, "s", runs, f"<= {TOP_S} s", v <= TOP_S,
                best=min(r.wall_s for r in k_runs), note=note)
        if version:
            res.add("S5", "  ratio to nsys-ai cold (pairwise)", med(ratio), "x", runs, "< 1x", med(ratio) < 1,
                    best=min(ratio))
        raw[src.name] = {"kbase": [r.__dict__ for r in k_runs], "nsys_ai": [r.__dict__ for r in n_runs]}
    res.raw["S5"] = {"nsys_ai": version, **raw}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=60)


def s6_top_1m(out: Path, res: Results, log, runs: int = 5) -> None:
    export = build_in_child("bench_common", "ensure_export", out=out, n_kernels=1_000_000, seed=1)
    floor_cmd = ["sqlite3", "-readonly", str(export), FLOOR_SQL]
    read_cmd = [*kbase_cmd(), "top", str(export), "--no-store"]
    log(f"S6 kbase top at 1M kernels: {runs} pairs (sqlite3 floor, kbase top)  load {loadavg()}")
    run_child(floor_cmd, out)
    run_child(read_cmd, out)
    floor, top, ratio = [], [], []
    for _ in range(runs):
        floor.append(run_child(floor_cmd, out))
        top.append(run_child(read_cmd, out))
        ratio.append(top[-1].wall_s / floor[-1].wall_s)
    fl = med([r.wall_s for r in floor])
    res.add("S6", "kbase top 1M kernels (reads the file)", med([r.wall_s for r in top]), "s", runs,
            best=min(r.wall_s for r in top), note=f"peak RSS {max(r.maxrss_bytes for r in top) / (1 << 20):,.0f} MiB")
    res.add("S6", "  ratio to the sqlite3 GROUP BY floor (pairwise)", med(ratio), "x", runs, f"<= {TOP_FLOOR_X}x",
            med(ratio) <= TOP_FLOOR_X, best=min(ratio), note=f"floor {fl:.3f} s")
    add_cpu_ratio(res, "S6", "  kbase top 1M", floor, top)

    # the same file, snapshotted at HEAD of a repository: top answers from the store
    repo = out / "s6_repo"
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.name=bench", "-c", "user.email=bench@kbase.invalid", "commit", "-q", "--allow-empty",
         "-m", "bench")
    db = f"sqlite:///{repo / 'kb.db'}"
    run_child([*kbase_cmd(), "snapshot", str(export), "--repo", str(repo), "--db", db, "-n", "1"], out)
    stored_cmd = [*kbase_cmd(), "top", str(export), "--repo", str(repo), "--db", db]
    probe = out / "s6_probe.json"
    run_child([*stored_cmd, "-f", "json"], out, stdout_path=probe)
    from_store = any("from the store" in n for n in json.loads(probe.read_text())["notes"])
    st_runs, st_ratio, read_ratio = [], [], []
    for i in range(runs):
        f = run_child(floor_cmd, out)
        s = run_child(stored_cmd, out)
        st_runs.append(s)
        st_ratio.append(s.wall_s / f.wall_s)
        read_ratio.append(s.wall_s / top[i].wall_s)
    v = med([r.wall_s for r in st_runs])
    res.add("S6", "kbase top 1M, stored at HEAD (answers from the store)", v, "s", runs, "from the store",
            from_store, best=min(r.wall_s for r in st_runs),
            note=f"{med(st_ratio):.2f}x the floor; {med(read_ratio):.2f}x kbase's own read path")

    py = nsys_ai_python()
    version = nsys_ai_version(py) if py else None
    if version:
        n = [_nsys_ai_top(py, export, out) for _ in range(min(runs, 3))]
        res.add("S6", f"  (ref) nsys-ai {version} cold, top_kernels 1M", med([r.wall_s for r in n]), "s", len(n),
                best=min(r.wall_s for r in n))
        warm = _nsys_ai_warm(py, export, out)
        if warm is None:
            res.add("S6", f"  (ref) nsys-ai {version} warm Parquet cache", float("nan"), "s", 0,
                    note="not measurable here: its cache needs DuckDB's sqlite_scanner extension (a download)")
        else:
            res.add("S6", f"  (ref) nsys-ai {version} warm Parquet cache", med([r.wall_s for r in warm]), "s",
                    len(warm), best=min(r.wall_s for r in warm))
    res.raw["S6"] = {"floor": [r.__dict__ for r in floor], "top": [r.__dict__ for r in top],
                     "stored": [r.__dict__ for r in st_runs], "from_store": from_store}


def _nsys_ai_warm(py: str, src: Path, out: Path) -> list[Run] | None:
    copy = _fresh_copy(src, out / "nsys_ai_work")
    run_child([py, str(WRAPPER), "warm", str(copy)], out, ok_codes=(0, 1))
    if not any(p.is_dir() and "cache" in p.name for p in copy.parent.iterdir()):
        return None
    return [run_child([py, str(WRAPPER), "skill", "run", "top_kernels", str(copy)], out) for _ in range(3)]
