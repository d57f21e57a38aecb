"""S5 and S6: ``kbase top`` on the shared real exports against nsys-ai, cold and warm, and at 1M kernels
against the sqlite3 floor and nsys-ai; ``kbase top`` of a file already stored at the current commit
(answered from the store) and of a file read before (answered from the top cache).

nsys-ai: set ``KBASE_BENCH_NSYS_AI`` to the Python of an environment where ``nsys-ai`` is installed
(``python -m venv V && V/bin/pip install nsys-ai==0.3.0``), or have ``nsys-ai`` on PATH. Each cold run
is its first on a fresh copy of the export (nothing beside it — and nsys-ai writes indexes into the
export it opens, so it must never see the shared original); its warm run is the next one on that copy,
with the Parquet cache the first built beside it (where DuckDB's ``sqlite_scanner`` extension loads:
``benchmarks/README.md`` says how to install it without a download).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from bench_common import (
    FLOOR_SQL,
    REPO,
    OneCoreBusy,
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
DECODE_FLOOR = Path(__file__).resolve().parent / "decode_floor.py"


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


def _has_cache(copy: Path) -> bool:
    return any(p.is_dir() and p.name.endswith(".nsys-cache") for p in copy.parent.iterdir())


def _nsys_ai_cold_warm(py: str, src: Path, out: Path, warm_runs: int = 1) -> tuple[Run, list[Run], bool]:
    """nsys-ai ``skill run top_kernels`` on a fresh copy of ``src``: the first run is its cold one (nothing
    beside the copy; it builds its Parquet cache there where DuckDB's ``sqlite_scanner`` extension loads),
    the next ``warm_runs`` on the same copy its warm ones. Also whether a cache was built."""
    copy = _fresh_copy(src, out / "nsys_ai_work")
    cmd = [py, str(WRAPPER), "skill", "run", "top_kernels", str(copy)]
    cold = run_child(cmd, out)
    built = _has_cache(copy)
    return cold, [run_child(cmd, out) for _ in range(warm_runs)], built


def _cpu(runs: list[Run]) -> float:
    return med([r.cpu_s for r in runs])


def _ratios(a: list[Run], b: list[Run]) -> tuple[list[float], list[float]]:
    """Pairwise wall and CPU ratios a / b."""
    return [x.wall_s / y.wall_s for x, y in zip(a, b)], [x.cpu_s / y.cpu_s for x, y in zip(a, b)]


def _fresh_cache(folder: Path) -> None:
    shutil.rmtree(folder / "cache", ignore_errors=True)
    folder.mkdir(parents=True, exist_ok=True)


def s5_real_exports(out: Path, res: Results, log, runs: int = 5) -> None:
    """Per shared export: kbase cold (``--no-cache``: reads the file) and warm (the top cache, filled by a first
    run), against nsys-ai cold (first run on a fresh copy) and warm (the next run on that copy, its cache
    beside it); the order within a round alternates, ratios are pairwise."""
    exports = sorted(SHARED_NSYS.glob("*.sqlite")) if SHARED_NSYS.is_dir() else []
    if not exports:
        res.add("S5", "kbase top on the shared real exports", float("nan"), "s", 0, note=f"no exports in {SHARED_NSYS}")
        return
    py = nsys_ai_python()
    version = nsys_ai_version(py) if py else None
    ref = f"nsys-ai {version}" if version else "nsys-ai (not installed)"
    log(f"S5 kbase top on {len(exports)} real exports, cold and warm, vs {ref} cold and warm: {runs} rounds each  "
        f"load {loadavg()}")
    store = out / "s5_store"
    _fresh_cache(store)
    raw: dict = {}
    for src in exports:
        warm_cmd = [*kbase_cmd(), "top", str(src), "--db", str(store / "kb.db")]
        cold_cmd = [*warm_cmd, "--no-cache"]
        run_child(cold_cmd, out, stdout_path=out / "s5_cold.txt")  # warm-up (page cache, .pyc)
        run_child(warm_cmd, out)  # fills the top cache
        run_child(warm_cmd, out, stdout_path=out / "s5_warm.txt")
        same = (out / "s5_cold.txt").read_bytes() == (out / "s5_warm.txt").read_bytes()
        if version:
            _nsys_ai_cold_warm(py, src, out)
        kc, kw, nc, nw, built = [], [], [], [], True
        for i in range(runs):
            if i % 2:
                kc.append(run_child(cold_cmd, out))
                kw.append(run_child(warm_cmd, out))
            if version:
                c, (w,), b = _nsys_ai_cold_warm(py, src, out)
                nc.append(c)
                nw.append(w)
                built &= b
            if not i % 2:
                kc.append(run_child(cold_cmd, out))
                kw.append(run_child(warm_cmd, out))
        wv, cv = med([r.wall_s for r in kw]), med([r.wall_s for r in kc])
        res.add("S5", f"kbase top {src.name}: warm (top cache)", wv, "s", runs, "same output", same,
                best=min(r.wall_s for r in kw), note=f"CPU {_cpu(kw):.3f} s" + (
                    f"; {ref} warm {med([r.wall_s for r in nw]):.3f} s, CPU {_cpu(nw):.3f} s"
                    + ("" if built else " (no Parquet cache built: its sqlite3 path)") if version else ""))
        if version:
            wall, cpu = _ratios(kw, nw)
            res.add("S5", "  ratio warm / nsys-ai warm (pairwise)", med(wall), "x", runs, "< 1.0x", med(wall) < 1,
                    best=min(wall), note=f"CPU {med(cpu):.2f}x")
        res.add("S5", f"kbase top {src.name}: cold (reads the file)", cv, "s", runs, f"<= {TOP_S} s", cv <= TOP_S,
                best=min(r.wall_s for r in kc), note=f"CPU {_cpu(kc):.3f} s" + (
                    f"; {ref} cold {med([r.wall_s for r in nc]):.3f} s, CPU {_cpu(nc):.3f} s" if version else ""))
        if version:
            wall, cpu = _ratios(kc, nw)
            cw, cc = _ratios(kc, nc)
            res.add("S5", "  ratio cold / nsys-ai warm (pairwise)", med(wall), "x", runs, "< 1.0x", med(wall) < 1,
                    best=min(wall),
                    note=f"CPU {med(cpu):.2f}x; cold / nsys-ai cold {med(cw):.2f}x (CPU {med(cc):.2f}x)")
        raw[src.name] = {k: [r.__dict__ for r in v] for k, v in
                         (("kbase_cold", kc), ("kbase_warm", kw), ("nsys_ai_cold", nc), ("nsys_ai_warm", nw))}
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
    # CPU with one core busy, as on a CI runner (issue 41, item 3): kbase's reader then decodes on one thread
    # beside them, what no analysis change removes: kbase's page decoder alone on the two tables it needs
    decode_cmd = [sys.executable, str(DECODE_FLOOR), str(export)]
    busy_floor, busy_top, busy_decode = [], [], []
    with OneCoreBusy():
        log(f"S6 with one core busy: {runs} rounds (floor, kbase top, decoder alone)  load {loadavg()}")
        for _ in range(runs):
            busy_floor.append(run_child(floor_cmd, out))
            busy_top.append(run_child(read_cmd, out))
            busy_decode.append(run_child(decode_cmd, out))
    add_cpu_ratio(res, "S6", "  kbase top 1M, one core busy", busy_floor, busy_top)
    add_cpu_ratio(res, "S6", "  kbase top 1M, idle cores", floor, top, target=False)
    add_cpu_ratio(res, "S6", "  (ref) the page decoder alone, kernel + runtime tables, one core busy", busy_floor,
                  busy_decode, target=False, note="benchmarks/decode_floor.py: interpreter, numpy, decoding")

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

    # the top cache: the file read once by a plain `kbase top` answers again from cache/ beside the store
    store = out / "s6_store"
    _fresh_cache(store)
    warm_cmd = [*kbase_cmd(), "top", str(export), "--db", str(store / "kb.db")]
    run_child(warm_cmd, out)  # reads the file and fills the top cache (untimed)
    py = nsys_ai_python()
    version = nsys_ai_version(py) if py else None
    kw, nw, nc = [], [], []
    if version:
        log(f"S6 nsys-ai {version} at 1M: its first run on a fresh copy (cold: builds its cache), then {runs} warm "
            f"runs alternating with kbase's warm ones  load {loadavg()}")
        copy = _fresh_copy(export, out / "nsys_ai_work")
        nsys_cmd = [py, str(WRAPPER), "skill", "run", "top_kernels", str(copy)]
        nc.append(run_child(nsys_cmd, out))
        built = _has_cache(copy)
        run_child(nsys_cmd, out)  # warm-up
        for i in range(runs):
            if i % 2:
                kw.append(run_child(warm_cmd, out))
            nw.append(run_child(nsys_cmd, out))
            if not i % 2:
                kw.append(run_child(warm_cmd, out))
    else:
        kw = [run_child(warm_cmd, out) for _ in range(runs)]
    to_read = med([k.wall_s / t.wall_s for k, t in zip(kw, top)])
    res.add("S6", "kbase top 1M, warm (top cache)", med([r.wall_s for r in kw]), "s", runs,
            best=min(r.wall_s for r in kw), note=f"CPU {_cpu(kw):.3f} s; {to_read:.2f}x kbase's own read path")
    if version:
        how = ("builds its Parquet cache" if built else
               "no Parquet cache built (DuckDB's sqlite_scanner not loadable): its sqlite3 path")
        res.add("S6", f"  (ref) nsys-ai {version} cold, top_kernels 1M (first run on a fresh copy)", nc[0].wall_s,
                "s", 1, note=f"CPU {nc[0].cpu_s:.3f} s; {how}")
        res.add("S6", f"  (ref) nsys-ai {version} warm, top_kernels 1M" + (" (Parquet cache)" if built else ""),
                med([r.wall_s for r in nw]), "s", runs, best=min(r.wall_s for r in nw), note=f"CPU {_cpu(nw):.3f} s")
        wall, cpu = _ratios(kw, nw)
        res.add("S6", "  ratio kbase warm / nsys-ai warm (pairwise)", med(wall), "x", runs, "< 1.0x", med(wall) < 1,
                best=min(wall), note=f"CPU {med(cpu):.2f}x")
        wall, cpu = _ratios(top, nw)
        res.add("S6", "  ratio kbase reading the file / nsys-ai warm", med(wall), "x", runs, "< 1.0x", med(wall) < 1,
                best=min(wall), note=f"CPU {med(cpu):.2f}x (not paired: the read ran in the first rounds)")
    res.raw["S6"] = {"floor": [r.__dict__ for r in floor], "top": [r.__dict__ for r in top],
                     "stored": [r.__dict__ for r in st_runs], "from_store": from_store, "nsys_ai": version,
                     "kbase_warm": [r.__dict__ for r in kw], "nsys_ai_cold": [r.__dict__ for r in nc],
                     "nsys_ai_warm": [r.__dict__ for r in nw]}
