"""One vocabulary (issue 38): a gate that passes because cuDNN re-picked its convolution algorithms (an algorithm
swap, judged per op) says so in the same word on every surface a person reads — the terminal, ``--format json``
and ``md``, the PR comment, JUnit, the HTML report and the notebook — and never ``regressed`` next to PASS.

The pair is real (committed, tests/data/kineto): ResNet-50 with 0 and with 4 DataLoader workers, two processes of
January 2021; between them cuDNN picked other kernels for three convolution ops. Each side is stored as a
baseline at its own commit, so ``kbase gate``, ``kbase report`` and ``kbase.gate`` judge one stored pair.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest

import kbase
from kbase.enums import KernelClass

from helpers.cli import run_kbase
from helpers.gitrepos import commit, git
from helpers.shared import REPO

DATA = REPO / "tests" / "data" / "kineto"
BEFORE, AFTER = (DATA / f"v100_resnet50_w{n}_jan2021.pt.trace.json.gz" for n in (0, 4))
SWAPPED = KernelClass.SWAPPED.label  # the one word, as the enum defines it
WORKLOAD = "resnet"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """A repository with one commit per side, each side's capture stored at its commit; every output of one gate."""
    root = tmp_path_factory.mktemp("vocab")
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    commits = [commit(repo, f"workers = {n}\n", f"DataLoader workers {n}") for n in (0, 4)]
    args = ["--repo", str(repo), "--db", str(root / "k.db"), "--name", WORKLOAD]
    for profile, rev in zip((BEFORE, AFTER), commits):
        r = run_kbase("snapshot", profile, "--rev", rev, *args, "-q")
        assert r.rc == 0, r
    out = root / "out"
    out.mkdir()
    files = ["--output", out / "gate.json", "--junit", out / "junit.xml", "--comment-md", out / "comment.md"]
    runs = {fmt: run_kbase("gate", *commits, *args, "--format", fmt, *(files if fmt == "json" else []))
            for fmt in ("table", "json", "md")}
    site = root / "site"
    report = run_kbase("report", "--out", site, "--before", commits[0], "--after", commits[1], *args)
    assert report.rc == 0, report
    settings = kbase.Settings.load(repo=repo, db=str(root / "k.db"), name=WORKLOAD)
    return {"runs": runs, "out": out, "site": site, "api": kbase.gate(*commits, settings)}


def test_the_pair_is_an_algorithm_swap_that_passes(pair):
    doc = json.loads(pair["runs"]["json"].stdout)
    assert doc["verdict"]["status"] == "pass" and all(r.rc == 0 for r in pair["runs"].values())
    assert doc["schema"] == "kbase.diff/4" and doc["version"] == 4
    swapped = [k for k in doc["kernels"] if k["class"] == "swapped"]
    assert len(swapped) >= 5 and all(k["swap"] and not k["gated"] for k in swapped)
    assert doc["counts"]["swapped"] == len(swapped) and doc["counts"]["regressed"] == 0
    assert not [k for k in doc["kernels"] if k["swap"] and k["class"] in ("regressed", "regressed_below_floor")]


def _words_of_swapped_rows(lines: list[str], names: list[str]) -> set[str]:
    """The first cell of each table row naming one of ``names`` (a short name is enough)."""
    return {re.split(r"\s{2,}|\s*\|\s*", line.strip().strip("|").strip())[0]
            for line in lines for n in names if n in line.replace("\\", "")}


def test_the_terminal_and_markdown_call_them_swapped_and_never_regressed(pair):
    doc = json.loads(pair["runs"]["json"].stdout)
    shorts = [k["short_name"] for k in doc["kernels"] if k["class"] == "swapped" and len(k["short_name"]) > 12]
    for fmt in ("table", "md"):
        text = pair["runs"][fmt].stdout
        assert "gate: PASS (exit 0)" in text
        assert "regressed" not in text, fmt  # not in the counts, not beside a row, not in a note
        counts = next(line for line in text.splitlines() if "kernels: " in line)
        assert f"{doc['counts']['swapped']} {SWAPPED}" in counts, counts
        rows = [line for line in text.splitlines() if line.startswith(("|", SWAPPED))]
        assert _words_of_swapped_rows(rows, shorts) == {SWAPPED}, fmt
        assert f"{SWAPPED}: {KernelClass.SWAPPED.meaning}" in " ".join(text.replace("\\", "").split())  # defined


def test_the_comment_says_swapped_and_keeps_every_notes_verdict(pair):
    text = (pair["out"] / "comment.md").read_text(encoding="utf-8")
    head = text.splitlines()[1]
    assert head.startswith("### ✅ kbase gate: PASS (exit 0) — ") and SWAPPED in head and "regressed" not in head
    assert "regressed" not in text
    cells = [line.split("|")[1].strip() for line in text.splitlines() if line.startswith("| ") and "**" not in line]
    assert SWAPPED in cells and "swap: regressed" not in text
    notes = [line for line in text.splitlines() if line.startswith("> algorithm swap in op")]
    assert len(notes) == 3
    for note in notes:  # the verdict comes first and the note is whole: the kernel list is what got shorter
        assert re.match(r"> algorithm swap in op \S+: (within noise|unchanged), not gated \(op time ", note), note
        assert not note.endswith("…") and note.endswith(")"), note


def test_junit_report_and_notebook_use_the_same_word(pair):
    doc = json.loads((pair["out"] / "gate.json").read_text(encoding="utf-8"))
    swapped = {k["name"] for k in doc["kernels"] if k["class"] == "swapped"}
    suite = ET.fromstring((pair["out"] / "junit.xml").read_text(encoding="utf-8"))
    said = {c.get("name"): c.findtext("system-out") or "" for c in suite.iter("testcase")}
    assert suite.find(".//failure") is None
    assert swapped <= set(said) and all(f" {SWAPPED} " in said[n] for n in swapped)

    page = (pair["site"] / "diff.html").read_text(encoding="utf-8")
    cells = re.findall(r'<td class="cls-([a-z_]+)">([^<]*)</td>', page)
    assert ("swapped", SWAPPED) in cells and all(word == KernelClass(cls).label for cls, word in cells)
    assert f"{doc['counts']['swapped']} {SWAPPED}" in page and "regressed" not in "".join(w for _, w in cells)

    g = pair["api"]
    html, line = g._repr_html_(), repr(g)
    assert f">{SWAPPED}<" in html and f"{doc['counts']['swapped']} {SWAPPED}" in line
    assert "regressed" not in line and ">regressed<" not in html and ">swap<" not in html


def test_the_words_are_defined_once_and_the_docs_say_the_same():
    """Every class has one word and one meaning (``kbase.enums.KernelClass``); docs/diff.md's table states them as
    the enum does, and no word says ``regressed`` but the one class that fails the gate."""
    table = {}
    for line in (REPO / "docs" / "diff.md").read_text(encoding="utf-8").splitlines():
        m = re.match(r"^\s*\| ([a-z ]+) \| `([a-z_]+)` \| (.+) \|$", line)
        if m:
            table[m.group(2)] = (m.group(1), m.group(3).replace("`", ""))
    assert table == {c.value: (c.label, c.meaning) for c in KernelClass}
    assert [c for c in KernelClass if "regressed" in c.label] == [KernelClass.REGRESSED]
    assert len({c.label for c in KernelClass}) == len(KernelClass)


def test_a_pass_with_a_slowdown_below_the_gate_floor_never_says_regressed(tmp_path, monkeypatch):
    """A small kernel 40% slower: real, but +0.2% of the iteration, under ``min_effect_pct``: the gate passes and
    every line a person reads calls it ``below floor`` — the counts, the row, the comment's headline, the quiet
    line — never ``regressed`` beside PASS."""
    from kbase.synth.generate import ExportSpec, default_kernel_mix, generate_export

    mix = default_kernel_mix()
    softmax = next(k.name for k in mix if k.short_name == "softmax_warp_forward")
    a = generate_export(tmp_path / "a.sqlite", ExportSpec(n_gpus=1, iterations=8, kernels=mix, seed=1)).path
    b = generate_export(tmp_path / "b.sqlite", ExportSpec(n_gpus=1, iterations=8, kernels=mix, seed=2,
                                                          slowdown={softmax: 1.4})).path
    monkeypatch.setenv("COLUMNS", "120")
    word = KernelClass.REGRESSED_BELOW_FLOOR.label
    r = run_kbase("gate", a, b, "--comment-md", tmp_path / "c.md")
    assert r.rc == 0 and "gate: PASS (exit 0)" in r.stdout, r
    counts = next(line for line in r.stdout.splitlines() if line.startswith("kernels: "))
    assert counts.startswith(f"kernels: 1 {word}") and "regressed" not in counts, counts
    row = next(line for line in r.stdout.splitlines() if "softmax_warp_forward" in line and "%" in line)
    assert row.startswith(word) and "regressed" not in row, row
    head = (tmp_path / "c.md").read_text(encoding="utf-8").splitlines()[1]
    assert head == f"### ✅ kbase gate: PASS (exit 0) — 1 {word}", head
    quiet = run_kbase("gate", a, b, "-q").stdout
    assert f"1 {word}" in quiet and "regressed" not in quiet, quiet
