"""``kbase bisect``'s outputs from a result as the API returns it: names from profiles and commit subjects are
inert data in the Markdown comment and the terminal, the JSON is strict and carries the fields issue 42 fixed."""

from __future__ import annotations

import json

from kbase.api.bisecting import BisectResult, Midpoint
from kbase.comparison.bisect import MidpointVerdict, Target, TargetKind
from kbase.render.bisect import bisect_doc, bisect_json, bisect_md, text_lines

HOSTILE = "gemm<|`**x**`|>\x1b[31m <img src=x onerror=alert(1)>"
C = [str(i) * 40 for i in range(1, 6)]


def _result(**kw) -> BisectResult:
    mids = [Midpoint(C[2], 2, MidpointVerdict.UNDECIDED, False, runs=3, why="moved from both"),
            Midpoint(C[1], 1, MidpointVerdict.SKIPPED, False, runs=1, why="exit 1: | <b>boom</b>\x07"),
            Midpoint(C[3], 3, MidpointVerdict.BAD, True)]
    base = dict(good=C[0], bad=C[4], target=Target(TargetKind.KERNEL, "/gemm/", HOSTILE), workload="w|<x>",
                commits=C, midpoints=mids, first_bad=None, range=(C[0], C[3]), runs=4, repeats=3,
                between=[C[1], C[2]], subjects={c: HOSTILE for c in C})
    return BisectResult(**(base | kw))


def test_markdown_keeps_names_and_subjects_inert():
    md = bisect_md(_result())
    assert "<img" not in md and "<b>" not in md and "\x1b" not in md and "\x07" not in md
    table = [line for line in md.splitlines() if line.startswith("| ")]
    assert all(line.count(" | ") == 4 for line in table[1:]), table  # a | in a subject does not add a cell
    assert "changed after 111111111111 and by 444444444444" in md


def test_json_is_strict_and_has_the_issue_fields():
    doc = json.loads(bisect_json(_result()), parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert doc["schema"] == "kbase.bisect/1" and doc["first_bad"] is None and doc["range"] == [C[0], C[3]]
    assert doc["runs"] == 4
    assert [(m["commit"], m["verdict"], m["reused"]) for m in doc["midpoints"]] == [
        (C[2], "undecided", False), (C[1], "skipped", False), (C[3], "bad", True)]
    assert doc["skipped"] == [C[1]] and doc["between"] == [C[1], C[2]]
    found = bisect_doc(_result(first_bad=C[3], range=None, between=[]))
    assert found["first_bad"] == C[3] and found["range"] is None and found["first_bad_subject"] == HOSTILE


def test_text_says_a_range_is_not_a_guess_and_why():
    lines = text_lines(bisect_doc(_result()))
    assert "not narrowed to one commit (1 undecided, 1 skipped)" in lines[0]
    assert any("the range holds the change, not a guess" in line for line in lines)
    assert any("the first bad commit may be any between" in line for line in lines)
