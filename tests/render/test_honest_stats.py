"""Honest statistics on screen (issue 27): a p-value under 1e-6 reads "< 1e-6" in every human output (never 0
or 9e-63; JSON keeps the number), and each flagged kernel's minimum detectable effect stands beside it on the
first screen at 120 columns and in the PR comment."""

from __future__ import annotations

import json
import re

from kbase.render.comment import comment_markdown
from kbase.units import fmt_p

from helpers.cli import run_kbase
from helpers.shared import REPO

JAN = [REPO / "tests" / "data" / "kineto" / f"v100_resnet50_w{n}_jan2021.pt.trace.json.gz" for n in (0, 4)]


def test_fmt_p():
    assert fmt_p(9e-63) == fmt_p(0.0) == fmt_p(1e-7) == "< 1e-6"
    assert fmt_p(2e-6) == "2.0e-06" and fmt_p(0.03) == "0.03"


def _slowed_pair(tmp_path):
    """The January pair with the 4-worker capture's largest elementwise kernel 30% slower (not in a swap)."""
    import gzip

    with gzip.open(JAN[1], "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    kernels = [e for e in events if isinstance(e, dict) and e.get("cat") == "Kernel"]
    target = next(e["name"] for e in kernels if "bn_bw_1C11_kernel_new" in e["name"])
    for e in kernels:
        if e["name"] == target:
            e["dur"] = round(e["dur"] * 1.3)
    out = tmp_path / "slow.pt.trace.json.gz"
    with gzip.open(out, "wt") as f:
        json.dump(doc, f)
    return JAN[1], out


def test_tiny_p_values_and_the_mde_in_every_human_output(tmp_path, monkeypatch):
    before, after = _slowed_pair(tmp_path)
    db = f"sqlite:///{tmp_path / 's.db'}"
    js = json.loads(run_kbase("gate", before, after, "--db", db, "--format", "json").stdout)
    row = next(k for k in js["kernels"] if k["class"] == "regressed")
    assert isinstance(row["p_value"], float) and row["p_value"] < 1e-6  # JSON: the number
    md = run_kbase("diff", before, after, "--db", db, "--format", "md")
    tiny = "&lt; 1e-6"  # "< 1e-6", its "<" escaped for Markdown
    assert tiny in md.stdout and not re.search(r"\|\s*(0|[0-9.]+e-[0-9]{2,})\s*\|", md.stdout)
    comment = comment_markdown(js)
    assert ("< 1e-6" in comment or tiny in comment) and not re.search(r"e-[0-9]{2,}", comment)
    head = next(line for line in comment.splitlines() if line.startswith("| | kernel"))
    assert "MDE" in head.split("|")[7]
    flagged = next(line for line in comment.splitlines() if line.startswith("| **regressed**"))
    assert re.match(r"\d+\.\d%", flagged.split("|")[7].strip())  # the flagged kernel's MDE beside it
    monkeypatch.setenv("COLUMNS", "120")
    screen = run_kbase("diff", before, after, "--db", db)
    lines = screen.stdout.splitlines()
    header = next(line for line in lines if line.startswith("class "))
    assert header.rstrip().endswith("MDE") and max(len(line) for line in lines if "│" not in line) <= 120
    regressed = next(line for line in lines if line.startswith("regressed "))
    assert re.search(r"\d+\.\d%\s*$", regressed)  # the MDE, last on the flagged row
