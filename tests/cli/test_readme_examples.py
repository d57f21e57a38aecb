"""The README's example outputs are produced by the current code.

Each block in README.md of the form

    <!-- example: kbase diff HEAD~1 HEAD -->
    ```text
    $ kbase diff HEAD~1 HEAD
    ...output...
    ```

is the output of that command (stdout and stderr, 100 columns) run in the repository of ``kbase demo``
(``KBASE_DB`` set to the demo's store). The test regenerates every block and compares, ignoring what
differs from run to run (commit hashes, dates). To update the README after a change to the output:

    KBASE_UPDATE_README=1 python -m pytest -q tests/cli/test_readme_examples.py
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.shared import REPO

README = REPO / "README.md"
BLOCK = re.compile(r"(<!-- example: (?P<cmd>[^\n]*?) -->\n```text\n)(?P<body>.*?)(```)", re.S)
WIDTH = 100


def normalise(text: str) -> str:
    """What changes from one demo run to the next: commit hashes and timestamps."""
    text = re.sub(r"\b[0-9a-f]{12}\b", "<commit>", text)
    text = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?", "<date>", text)
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


def run_example(cmd: str, repo: Path, db: str) -> str:
    args = shlex.split(cmd)
    assert args[0] == "kbase", cmd
    env = {k: v for k, v in os.environ.items() if k != "KBASE_DEBUG"}
    env.update(COLUMNS=str(WIDTH), KBASE_DB=db, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "kbase.cli", *args[1:]], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    return f"$ {cmd}\n" + "\n".join(line.rstrip() for line in out.splitlines()) + "\n"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("readme-demo")
    r = run_kbase("demo", "--dir", str(root))
    assert r.rc == 0, r
    return root / "repo", f"sqlite:///{root / 'kbase.db'}"


def test_readme_examples_are_current(demo):
    repo, db = demo
    text = README.read_text(encoding="utf-8")
    blocks = list(BLOCK.finditer(text))
    assert len(blocks) >= 3, "README.md has lost its generated examples"
    fresh = {m["cmd"]: run_example(m["cmd"], repo, db) for m in blocks}
    if os.environ.get("KBASE_UPDATE_README"):
        README.write_text(BLOCK.sub(lambda m: m.group(1) + fresh[m["cmd"]] + m.group(4), text), encoding="utf-8")
        return
    stale = [m["cmd"] for m in blocks if normalise(m["body"]) != normalise(fresh[m["cmd"]])]
    for cmd in stale:
        print(f"--- README\n{normalise(next(m['body'] for m in blocks if m['cmd'] == cmd))}\n--- now\n"
              f"{normalise(fresh[cmd])}")
    assert not stale, (f"README examples out of date: {stale}; regenerate with "
                       "KBASE_UPDATE_README=1 python -m pytest -q tests/cli/test_readme_examples.py")
    for m in blocks:  # every example's table fits the width it was made at (an error is one line by design)
        assert all(len(line) <= WIDTH for line in m["body"].splitlines()[1:] if not line.startswith("kbase: ")), \
            m["cmd"]
