"""The PR comment (``kbase.render.comment``): the demo's regression is short, names are inert, the
limit holds, and the sticky marker comes first."""

from __future__ import annotations

import copy
import re

import pytest

from kbase.render.comment import GITHUB_COMMENT_LIMIT, MARKER, comment_markdown, md_text, no_baseline_markdown


@pytest.fixture(scope="module")
def demo_doc(tmp_path_factory) -> dict:
    """The kbase.diff/4 document of ``kbase demo``'s regression (one GEMM 25% slower per launch)."""
    import kbase
    from kbase.render.diff import diff_doc
    from kbase.synth import demo

    run = demo.prepare(tmp_path_factory.mktemp("demo"))
    settings = kbase.Settings.load(repo=run.repo, db=run.db_url, name="demo-train")
    kbase.snapshot(run.before_export, settings)
    demo.second_commit(run)
    kbase.snapshot(run.after_export, settings)
    result = kbase.gate("HEAD~1", "HEAD", settings)
    return diff_doc(result.comparison, result.verdict)


def _above_fold(text: str) -> list[str]:
    return text.split("<details>")[0].rstrip("\n").split("\n")


def test_demo_regression_fits_above_the_fold(demo_doc):
    text = comment_markdown(demo_doc)
    assert text.startswith(MARKER + "\n")
    fold = _above_fold(text)
    assert len(fold) <= 60, "\n".join(fold)
    assert "FAIL" in fold[1] and "regressed" in fold[1]
    slowed = next(r for r in demo_doc["kernels"] if r["class"] == "regressed")
    assert any(md_text(slowed["short_name"], 70) in line for line in fold)
    assert "<details><summary>" in text and text.rstrip().endswith("</sub>")
    print("\n".join(fold))  # shown with -s: what a reviewer sees


def test_verdict_argument_overrides_the_document(demo_doc):
    passing = {"code": 0, "status": "pass", "reasons": [], "warnings": [], "failing": [], "accepted": []}
    assert "PASS (exit 0)" in comment_markdown(demo_doc, passing)


def test_huge_diff_is_cut_under_githubs_limit(demo_doc):
    doc = copy.deepcopy(demo_doc)
    row = next(r for r in doc["kernels"] if r["class"] == "regressed")
    doc["kernels"] = [dict(row, name=f"{row['name']}_{i}", short_name=f"kernel_{i}_" + "x" * 300) for i in range(3000)]
    text = comment_markdown(doc)
    assert len(text) <= GITHUB_COMMENT_LIMIT
    assert re.search(r"_\d+ more row\(s\) left out", text)
    assert text.count("</details>") == 1 and text.startswith(MARKER)


@pytest.mark.parametrize("name", [
    "evil|pipe", "tick`code`", "<script>alert(1)</script>", "a&amp;b", "*bold* _it_", "[x](javascript:y)",
    "line\nbreak", "cr\rreturn", "<!-- hide -->", "@here ping", "~~strike~~", "# heading", "\u2028sep",
])
def test_names_are_inert_markdown(demo_doc, name):
    doc = copy.deepcopy(demo_doc)
    row = next(r for r in doc["kernels"] if r["class"] == "regressed")
    row["short_name"] = name
    row["diagnosis"] = name
    text = comment_markdown(doc)
    for line in text.split("\n"):
        if line.startswith("|") and ("regressed" in line):
            cells = re.split(r"(?<!\\)\|", line)[1:-1]
            assert len(cells) in (8, 14), line  # no cell break from the name (the top table and the full one)
    assert "<script" not in text and "<!-- hide" not in text and "@here" not in text
    assert "\r" not in text and "\u2028" not in text
    assert "](javascript" not in text.replace("\\]", "")
    assert text.count("\n") == comment_markdown(demo_doc).count("\n")  # no extra line from the name


def test_no_baseline_notice():
    text = no_baseline_markdown("train|8gpu", "a" * 40, "no baseline of workload 'train' at HEAD~1")
    assert text.startswith(MARKER) and "PASS" in text and "train\\|8gpu" in text


def test_two_changed_kernels_with_one_short_name_are_told_apart(demo_doc):
    from kbase.analysis.names import short_id

    doc = copy.deepcopy(demo_doc)
    row = next(r for r in doc["kernels"] if r["class"] == "regressed")
    twins = [dict(row, name=f"void elementwise_kernel<{w}, Fill<float>>(int)", short_name="elementwise_kernel")
             for w in (2, 4)]
    doc["kernels"] = twins + [r for r in doc["kernels"] if r is not row]
    fold = "\n".join(_above_fold(comment_markdown(doc)))
    for t in twins:
        assert short_id(t["name"]) in fold, fold
    assert md_text("elementwise_kernel<2, Fill<float>>") in fold, fold


def test_diff_doc_is_made_of_json_values_only(demo_doc):
    """``diff_doc`` cleans all but its kernel rows, which ``records`` and ``_num`` make plain (they are not
    walked a second time): the document equals its cleaned copy and encodes as strict JSON."""
    import json

    from kbase import jsonable

    assert jsonable.clean(demo_doc) == demo_doc
    json.dumps(demo_doc, allow_nan=False)
    assert all(type(v) in (str, int, float, bool, type(None)) for k in demo_doc["kernels"] for v in k.values())
