#!/usr/bin/env python3
"""A stand-in ``kbase`` for the template tests until ``kbase gate`` has ``--comment-md FILE`` and
``--if-no-baseline pass|fail`` (lead wiring). It is also the reference behaviour for that wiring:

- ``--comment-md FILE``: write ``kbase.render.comment.comment_markdown(doc)`` of the gate's JSON
  document (the one ``--output`` writes), whatever the verdict;
- ``--if-no-baseline pass``: when a side has no baseline (or names a revision that does not exist,
  as ``HEAD~1`` on a root commit), print a ``::notice`` line, write ``no_baseline_markdown`` to the
  comment file and exit 0 (``fail``: exit 2 as today).

Every other command goes straight to the real CLI (``python -m kbase.cli``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

NO_BASELINE = ("no baseline of workload", "unknown git revision", "the store holds no baselines")


def _pop(args: list[str], flag: str) -> str | None:
    if flag in args:
        i = args.index(flag)
        value = args[i + 1]
        del args[i : i + 2]
        return value
    return None


def main() -> int:
    args = sys.argv[1:]
    real = [sys.executable, "-m", "kbase.cli"]
    if not args or args[0] != "gate":
        return subprocess.call(real + args)
    comment = _pop(args, "--comment-md")
    if_no_baseline = _pop(args, "--if-no-baseline") or "pass"
    output = None
    if "--output" in args:
        output = args[args.index("--output") + 1]
    elif comment:
        output = os.path.join(tempfile.mkdtemp(), "kbase-report.json")
        args += ["--output", output]
    proc = subprocess.run(real + args, capture_output=True, text=True, check=False)
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    from kbase.render.comment import comment_markdown, no_baseline_markdown

    if proc.returncode == 2 and any(s in proc.stderr for s in NO_BASELINE):
        reason = proc.stderr.strip().splitlines()[-1]
        if comment:
            workload = args[args.index("--name") + 1] if "--name" in args else "default"
            head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False).stdout.strip()
            with open(comment, "w", encoding="utf-8") as fh:
                fh.write(no_baseline_markdown(workload, head, reason))
        if if_no_baseline == "pass":
            print(f"::notice title=kbase gate::no baseline to compare with, passing: {reason}")
            return 0
        return 2
    if comment and output and os.path.exists(output):
        with open(output, encoding="utf-8") as fh:
            doc = json.load(fh)
        with open(comment, "w", encoding="utf-8") as fh:
            fh.write(comment_markdown(doc))
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
