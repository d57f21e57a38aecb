"""Generated repositories for ``kbase bisect``: a line of commits, each changing ``perf.json`` (how much slower
one kernel is, whether the build fails), and ``capture.py``, the capture command a bisect runs at each
midpoint: it reads ``perf.json`` in its worktree and writes an nsys-style export with kbase's own generator."""

from __future__ import annotations

import json
import subprocess
import sys
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
COMMAND = f"{sys.executable} capture.py {{out}}"


@dataclass
class Line:
    repo: Path
    commits: list[str]  # oldest first: commits[0] is GOOD


def make_line(repo: Path, slowdowns: list[float], failing: set[int] = frozenset()) -> Line:
    """A repository of ``len(slowdowns)`` commits: commit i sets the kernel's slowdown to ``slowdowns[i]``
    (``failing``: the capture fails there). One ``git fast-import`` for them all (64 commits in ~20 ms)."""
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q", "-b", "main")
    stream = []
    for i, s in enumerate(slowdowns):
        perf = json.dumps({"kernel": KERNEL, "slowdown": s, "fail": i in failing}).encode()
        msg = f"change {i}: slowdown {s}".encode()
        stream += [b"commit refs/heads/main", b"mark :%d" % (i + 1),
                   b"committer dev <dev@kbase.invalid> %d +0000" % (1_700_000_000 + 60 * i),
                   b"data %d" % len(msg), msg]
        if i:
            stream.append(b"from :%d" % i)
        for path, body in (("perf.json", perf), ("capture.py", CAPTURE.encode())):
            stream += [b"M 644 inline " + path.encode(), b"data %d" % len(body), body]
        stream.append(b"")
    subprocess.run(["git", "fast-import", "--quiet"], cwd=repo, input=b"\n".join(stream) + b"\n", check=True)
    git(repo, "checkout", "-q", "-f", "main")
    commits = git(repo, "rev-list", "--reverse", "main").split()
    return Line(repo, commits)


def capture_at(line: Line, i: int, out: Path) -> Path:
    """What ``capture.py`` writes at commit ``i``, made here (the stored GOOD and BAD of a test)."""
    cfg = json.loads(git(line.repo, "show", f"{line.commits[i]}:perf.json"))
    from kbase.synth.generate import ExportSpec, default_kernel_mix, generate_export

    name = next(k.name for k in default_kernel_mix() if k.name.startswith(cfg["kernel"]))
    generate_export(out, ExportSpec(n_gpus=1, iterations=8, seed=1000 + i), overwrite=True,
                    slowdown={name: cfg["slowdown"]} if cfg["slowdown"] != 1.0 else {})
    return out
