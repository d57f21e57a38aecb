"""What stored acceptances cost the gate: ``kbase gate HEAD~1 HEAD`` (one kernel regressed, not accepted) on a
store with N acceptances against the same store with none, measured in the same run.

    python benchmarks/gate_acceptances.py [--acceptances 10000] [--commits 2000] [--rounds 3]

The repository has ``--commits`` commits (``git fast-import``); the acceptances are spread over them (half in
the compared range's history, half on a side branch), their patterns a mix of exact kernel names, globs and
``/regex/``, none matching the regressed kernel, so every one is looked at. Target (issue 39): the gate with
10,000 acceptances add at most 2 s to the gate with none (0.2 ms each).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.kineto_traces import edit, trace_doc, write_trace  # noqa: E402


def git(repo: Path, *args: str, data: bytes | None = None) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], input=data, check=True, capture_output=True).stdout.decode()


def history(repo: Path, commits: int) -> list[str]:
    """``commits`` commits on main and as many on a side branch, through fast-import; main's hashes, oldest first."""
    git(repo, "init", "-q", "-b", "main")
    stream = []
    for branch, n in (("main", commits), ("side", commits)):
        for i in range(n):
            msg, content = f"{branch} {i}\n", f"{branch}{i}\n"
            parent = "from :1\n" if branch == "side" and i == 0 else ""
            mark = f"mark :{i + 1}\n" if branch == "main" else ""
            stream.append(f"commit refs/heads/{branch}\n{mark}committer b <b@kbase.invalid> {1_700_000_000 + i} +0000\n"
                          f"data {len(msg)}\n{msg}{parent}M 644 inline f\ndata {len(content)}\n{content}\n")
    git(repo, "fast-import", "--quiet", data="".join(stream).encode())
    git(repo, "checkout", "-q", "-f", "main")
    return git(repo, "rev-list", "--reverse", "main").split()


def kbase(*args: str) -> tuple[int, float]:
    start = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "kbase.cli", *args], capture_output=True, text=True)
    return r.returncode, time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--acceptances", type=int, default=10_000)
    ap.add_argument("--commits", type=int, default=2_000)
    ap.add_argument("--rounds", type=int, default=3)
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = root / "repo"
        repo.mkdir()
        main_commits = history(repo, opts.commits)
        side = git(repo, "rev-list", "side").split()
        doc = trace_doc(0, 1, steps=6)

        def slower(d: dict) -> None:
            for e in d["traceEvents"]:
                if e.get("cat") == "kernel" and e["name"] == "relu_kernel":
                    e["dur"] = round(e["dur"] * 3, 3)

        dbs = {n: root / f"{n}.db" for n in (0, opts.acceptances)}
        for i, d in enumerate((doc, edit(doc, slower))):
            git(repo, "checkout", "-q", main_commits[-2 + i])
            trace = write_trace(root / f"t{i}.json", d)
            for db in dbs.values():
                rc, _ = kbase("snapshot", str(trace), "--db", f"sqlite:///{db}", "--repo", str(repo), "--name", "w",
                              "-q")
                assert rc == 0
        git(repo, "checkout", "-q", "main")
        kinds = ["void gemm_kernel<float>(float*) {}", "*softmax_{}*", "/^layer_norm_{}$/"]
        now = datetime.now(UTC).isoformat()
        with sqlite3.connect(dbs[opts.acceptances]) as conn:
            rows = []
            for i in range(opts.acceptances):
                line = main_commits if i % 2 else side
                rows.append(("w", kinds[i % 3].format(i), line[i % len(line)], "bench", "", now, None))
            conn.executemany("insert into acceptance (workload, pattern, `commit`, reason, author, created_at, "
                             "expires) values (?, ?, ?, ?, ?, ?, ?)", rows)
        times: dict[int, list[float]] = {n: [] for n in dbs}
        for _ in range(opts.rounds):
            for n, db in dbs.items():
                rc, t = kbase("gate", "HEAD~1", "HEAD", "--db", f"sqlite:///{db}", "--repo", str(repo), "--name", "w")
                assert rc == 1, rc  # the regression stays (no acceptance matches it)
                times[n].append(t)
        base, many = min(times[0]), min(times[opts.acceptances])
        target = many - base <= 2.0  # what the acceptances add: the gate itself varies by machine
        print(f"gate, 0 acceptances: {base:.2f} s; {opts.acceptances:,} acceptances: {many:.2f} s "
              f"(+{many - base:.2f} s, {1000 * (many - base) / max(opts.acceptances, 1):.3f} ms each) "
              f"[{os.cpu_count()} CPUs] -> target {'met' if target else 'NOT met'}")


if __name__ == "__main__":
    main()
