"""Generated repositories for ``kbase bisect``: a line of commits, each changing ``perf.json`` (how much slower
one kernel is, whether the build fails), and ``capture.py``, the capture command a bisect runs at each
midpoint: it reads ``perf.json`` in its worktree and writes an nsys-style export with kbase's own generator."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from helpers.gitrepos import git

KERNEL = "void flash::flash_fwd_kernel"  # 6.6% of the iteration in the default mix: +5% is 0.33% of it
CAPTURE = '''\
import json, os, sys, zlib
from pathlib import Path
from kbase.synth.generate import ExportSpec, default_kernel_mix, generate_export

cfg = json.loads(Path("perf.json").read_text())
if cfg.get("fail"):
    sys.exit("error: the build failed at this commit")
name = next(k.name for k in default_kernel_mix() if k.name.startswith(cfg["kernel"]))
# a fresh process per run: another seed per commit and attempt, the same in every test run
seed = zlib.crc32(os.environ.get("KBASE_BISECT_COMMIT", "").encode() + os.path.basename(sys.argv[1]).encode())
generate_export(sys.argv[1], ExportSpec(n_gpus=1, iterations=8, seed=seed), overwrite=True,
                slowdown={name: cfg["slowdown"]} if cfg["slowdown"] != 1.0 else {})
'''
# A PyTorch profiler trace instead (``"format": "kineto"``): each kernel launched inside its op (``cpu_op``), so
# the op is known; ``gemm`` names the kernel aten::mm runs (a library swapping algorithms changes it).
CAPTURE_KINETO = '''\
import json, os, random, sys, zlib
from pathlib import Path

cfg = json.loads(Path("perf.json").read_text())
rng = random.Random(zlib.crc32(os.environ.get("KBASE_BISECT_COMMIT", "").encode() + os.path.basename(sys.argv[1]).encode()))
ops = [("aten::mm", cfg["gemm"], 400.0 * cfg["slowdown"]), ("aten::relu", "relu_kernel", 100.0),
       ("aten::add", "add_kernel", 50.0)]
events, corr, t = [], 1, 1000.0
for step in range(1, 13):
    events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}", "pid": 1, "tid": 2,
                   "ts": t, "dur": 2500.0})
    gpu = t + 30.0
    for op, kernel, us in ops * 3:
        events.append({"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 2, "ts": t + 1, "dur": 8.0})
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2,
                       "ts": t + 2, "dur": 5.0, "args": {"correlation": corr}})
        dur = round(us * (1 + rng.gauss(0, 0.005)), 3)
        gpu = max(gpu, t + 10)
        events.append({"ph": "X", "cat": "kernel", "name": kernel, "pid": 0, "tid": 7, "ts": round(gpu, 3),
                       "dur": dur, "args": {"device": 0, "correlation": corr, "stream": 7}})
        gpu += dur + 1
        corr += 1
        t += 10.0
    t = max(t, gpu) + 50.0
doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "Fake GPU"}], "traceEvents": events,
       "baseTimeNanoseconds": 1700000000000000000}
Path(sys.argv[1]).write_text(json.dumps(doc))
'''
COMMAND = f"{sys.executable} capture.py {{out}}"


@dataclass
class Line:
    repo: Path
    commits: list[str]  # oldest first: commits[0] is GOOD


def make_line(repo: Path, slowdowns: list[float], failing: set[int] = frozenset(), kernel: str = KERNEL,
              gemms: list[str] | None = None) -> Line:
    """A repository of ``len(slowdowns)`` commits: commit i sets the kernel's slowdown to ``slowdowns[i]``
    (``failing``: the capture fails there). ``gemms``: a Kineto trace instead, commit i's aten::mm running
    ``gemms[i]``. One ``git fast-import`` for them all (64 commits in ~20 ms)."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    stream = []
    for i, s in enumerate(slowdowns):
        cfg = {"kernel": kernel, "slowdown": s, "fail": i in failing} | ({"gemm": gemms[i]} if gemms else {})
        perf = json.dumps(cfg).encode()
        msg = f"change {i}: slowdown {s}".encode()
        stream += [b"commit refs/heads/main", b"mark :%d" % (i + 1),
                   b"committer dev <dev@kbase.invalid> %d +0000" % (1_700_000_000 + 60 * i),
                   b"data %d" % len(msg), msg]
        if i:
            stream.append(b"from :%d" % i)
        for path, body in (("perf.json", perf), ("capture.py", (CAPTURE_KINETO if gemms else CAPTURE).encode())):
            stream += [b"M 644 inline " + path.encode(), b"data %d" % len(body), body]
        stream.append(b"")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=b"\n".join(stream) + b"\n", check=True)
    git(repo, "checkout", "-q", "-f", "main")
    commits = git(repo, "rev-list", "--reverse", "main").split()
    return Line(repo, commits)


def capture_at(line: Line, i: int, out: Path, gpus: int = 1) -> Path:
    """What ``capture.py`` writes at commit ``i``, made here (the stored GOOD and BAD of a test; ``gpus``: CI's
    full run on more GPUs than the capture command's)."""
    cfg = json.loads(git(line.repo, "show", f"{line.commits[i]}:perf.json"))
    if "gemm" in cfg:  # the Kineto line: its own script, as CI would run it
        script = git(line.repo, "show", f"{line.commits[i]}:capture.py")
        with tempfile.TemporaryDirectory() as where:
            Path(where, "perf.json").write_text(json.dumps(cfg))
            subprocess.run([sys.executable, "-c", script, str(out)], cwd=where, check=True,
                           env={**os.environ, "KBASE_BISECT_COMMIT": "ci"})
        return out
    from kbase.synth.generate import ExportSpec, default_kernel_mix, generate_export

    name = next(k.name for k in default_kernel_mix() if k.name.startswith(cfg["kernel"]))
    generate_export(out, ExportSpec(n_gpus=gpus, iterations=8, seed=1000 + i), overwrite=True,
                    slowdown={name: cfg["slowdown"]} if cfg["slowdown"] != 1.0 else {})
    return out
