"""The example outputs in README.md and docs/*.md are produced by the current code.

Each block of the form

    <!-- example: kbase diff HEAD~1 HEAD -->
    ```text
    $ kbase diff HEAD~1 HEAD
    ...output...
    ```

is the output of that command (stdout and stderr, 100 columns) run in the repository of ``kbase demo``
(``KBASE_DB`` set to the demo's store). A block marked ``<!-- example in ../shared/data/kineto: CMD -->`` runs
in that folder (relative to the repository) instead, and is checked only where the real data is present.
The test regenerates every block and compares, ignoring what differs from run to run (commit hashes, dates).
To update the files after a change to the output:

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
from helpers.shared import REPO, SHARED_SKIP_REASON

BLOCK = re.compile(r"(<!-- example(?: in (?P<where>[^:\n]+))?: (?P<cmd>[^\n]*?) -->\n```text\n)(?P<body>.*?)(```)",
                   re.S)
# README and every docs page that shows command output
DOCUMENTS = [REPO / "README.md"] + [p for p in sorted((REPO / "docs").glob("*.md"))
                                    if BLOCK.search(p.read_text(encoding="utf-8"))]
WIDTH = 100
# outputs that are not tables laid out for the terminal (documents, or --wide rows)
UNFITTED = re.compile(r"(^| )(--format|-f|--wide|--comment-md)\b")


def normalise(text: str) -> str:
    """What changes from one demo run to the next: commit hashes and timestamps."""
    text = re.sub(r"\b[0-9a-f]{40}\b", "<commit>", text)
    text = re.sub(r"\b[0-9a-f]{12}\b", "<commit>", text)
    text = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d(:\d\d(\.\d+)?)?([+-]\d\d:\d\d)?", "<date>", text)
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


def run_example(cmd: str, cwd: Path, db: str) -> str:
    args = shlex.split(cmd)
    assert args[0] == "kbase", cmd
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBASE_") or k == "KBASE_TEST_PG_URL"}
    env.update(COLUMNS=str(WIDTH), KBASE_DB=db, PYTHONPATH=str(REPO))
    env.pop("GITHUB_STEP_SUMMARY", None)
    proc = subprocess.run([sys.executable, "-m", "kbase.cli", *args[1:]], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    return f"$ {cmd}\n" + "\n".join(line.rstrip() for line in out.splitlines()) + "\n"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("readme-demo")
    r = run_kbase("demo", "--dir", str(root))
    assert r.rc == 0, r
    return root / "repo", f"sqlite:///{root / 'kbase.db'}"


def _where(match: re.Match, demo_repo: Path) -> Path | None:
    """The folder an example runs in; None when it needs data that is not here."""
    if not match["where"]:
        return demo_repo
    folder = (REPO / match["where"]).resolve()
    return folder if folder.is_dir() else None


@pytest.mark.slow
@pytest.mark.parametrize("doc", DOCUMENTS, ids=[str(d.relative_to(REPO)) for d in DOCUMENTS])
def test_examples_are_current(demo, doc):
    repo, db = demo
    text = doc.read_text(encoding="utf-8")
    blocks = list(BLOCK.finditer(text))
    if doc.name == "README.md":
        assert len(blocks) >= 3, "README.md has lost its generated examples"
    places = {m.start(): _where(m, repo) for m in blocks}
    fresh = {m.start(): run_example(m["cmd"], places[m.start()], db) for m in blocks if places[m.start()]}
    if os.environ.get("KBASE_UPDATE_README"):
        doc.write_text(BLOCK.sub(lambda m: m.group(1) + fresh.get(m.start(), m["body"]) + m.group(5), text),
                       encoding="utf-8")
        return
    stale = [m["cmd"] for m in blocks if m.start() in fresh and normalise(m["body"]) != normalise(fresh[m.start()])]
    for m in blocks:
        if m["cmd"] in stale:
            print(f"--- {doc.name}\n{normalise(m['body'])}\n--- now\n{normalise(fresh[m.start()])}")
    assert not stale, (f"{doc.name}: examples out of date: {stale}; regenerate with "
                       "KBASE_UPDATE_README=1 python -m pytest -q tests/cli/test_readme_examples.py")
    for m in blocks:  # a table fits the width it was made at (an error is one line by design)
        if not UNFITTED.search(m["cmd"]):
            assert all(len(line) <= WIDTH for line in m["body"].splitlines()[1:] if not line.startswith("kbase: ")), \
                m["cmd"]
    if len(fresh) < len(blocks):
        pytest.skip(f"{doc.name}: {len(blocks) - len(fresh)} example(s) need {SHARED_SKIP_REASON.split(' not')[0]}")
