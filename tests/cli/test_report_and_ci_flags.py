"""``kbase report`` and the CI flags of ``kbase gate``: ``--comment-md``, ``--if-no-baseline``, and the
``bmf`` / ``github-benchmark`` formats, on the demo's store (two commits, one GEMM 25% slower)."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from kbase.render.comment import MARKER

from helpers.cli import run_kbase


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    r = run_kbase("demo", "--dir", str(root), "--quiet")
    assert r.rc == 0, r
    return {"repo": root / "repo", "db": f"sqlite:///{root / 'kbase.db'}", "root": root}


def _kb(demo, *args):
    return run_kbase(*args, "--db", demo["db"], "--repo", str(demo["repo"]), "--name", "demo-train")


def test_report_writes_a_site_and_refuses_a_foreign_folder(demo, tmp_path):
    out = tmp_path / "site"
    r = _kb(demo, "report", "--out", str(out))
    assert r.rc == 0, r
    index, diff = (out / "index.html").read_text(), (out / "diff.html").read_text()
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', index)
    assert scripts and not any("://" in s or s.startswith("//") for s in scripts)  # all inside the folder
    assert all((out / s).is_file() for s in scripts)
    assert "FAIL" in diff and "sm90_xmma_gemm" in diff  # the demo's regression, with its verdict
    manifest = json.loads((out / "kbase-report.json").read_text())
    assert manifest["schema"].startswith("kbase.report/")
    assert _kb(demo, "report", "--out", str(out)).rc == 0  # its own previous report is replaced
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "mine.txt").write_text("keep")
    r = _kb(demo, "report", "--out", str(foreign))
    assert r.rc == 2 and "\n" not in r.stderr.strip() and (foreign / "mine.txt").read_text() == "keep"
    assert sorted(p.name for p in foreign.iterdir()) == ["mine.txt"]


def test_report_diff_by_revision(demo, tmp_path):
    """``--before``/``--after`` take revisions and ``@ID``s (positions stay accepted); a revision kbase gate
    refuses is the user's error, exit 2 with one line, and no report is written."""
    out = tmp_path / "site"
    r = _kb(demo, "report", "--out", str(out), "--before", "HEAD~1", "--after", "@2")
    assert r.rc == 0, r
    head = subprocess.run(["git", "-C", str(demo["repo"]), "rev-parse", "HEAD~1"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert head[:12] in (out / "diff.html").read_text() and "FAIL" in (out / "diff.html").read_text()
    r = _kb(demo, "report", "--out", str(tmp_path / "typo"), "--before", "no-such-rev")
    assert r.rc == 2 and "no-such-rev" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r
    assert not (tmp_path / "typo").exists()
    r = _kb(demo, "report", "--out", str(tmp_path / "far"), "--before", "-9")
    assert r.rc == 2 and "position -9" in r.stderr, r


def test_gate_comment_md_is_written_whatever_the_verdict(demo, tmp_path):
    md = tmp_path / "c.md"
    r = _kb(demo, "gate", "HEAD~1", "HEAD", "--comment-md", str(md))
    assert r.rc == 1, r
    text = md.read_text()
    assert text.startswith(MARKER) and "FAIL" in text and len(text) < 65_536
    r = _kb(demo, "gate", "HEAD~1", "HEAD", "--comment-md", str(md), "--max-increase-pct", "50", "--warn-only")
    assert r.rc == 0 and md.read_text().startswith(MARKER)


def test_if_no_baseline(demo, tmp_path, monkeypatch):
    repo = tmp_path / "fresh"
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "root"], check=True)
    db = f"sqlite:///{tmp_path / 'k.db'}"
    args = ("--db", db, "--repo", str(repo), "--name", "w")
    assert run_kbase("gate", *args).rc == 2  # default: fail, as before
    md = tmp_path / "c.md"
    r = run_kbase("gate", *args, "--if-no-baseline", "pass", "--comment-md", str(md))
    assert r.rc == 0 and "no baseline" in r.stderr, r
    assert md.read_text().startswith(MARKER) and "no baseline" in md.read_text()
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    r = run_kbase("gate", "HEAD~1", "HEAD", *args, "--if-no-baseline", "pass")
    assert r.rc == 0 and r.stdout.startswith("::notice"), r
    monkeypatch.delenv("GITHUB_ACTIONS")
    # with a store: a misspelt revision is still an error, and so is a bad choice
    assert run_kbase("db", "upgrade", "--db", db, "--repo", str(repo)).rc == 0
    assert run_kbase("gate", "mian", "HEAD", *args, "--if-no-baseline", "pass").rc == 2
    r = run_kbase("gate", *args, "--if-no-baseline", "maybe")
    assert r.rc == 2 and "--if-no-baseline" in r.stderr


@pytest.mark.parametrize("fmt", ["bmf", "github-benchmark"])
def test_interop_formats_are_strict_json(demo, fmt):
    for args in (("diff", "HEAD~1", "HEAD"), ("gate", "HEAD~1", "HEAD"), ("show", "HEAD")):
        r = _kb(demo, *args, "--format", fmt)
        assert r.rc in (0, 1), r
        doc = json.loads(r.stdout, parse_constant=lambda c: pytest.fail(f"non-strict JSON constant {c}"))
        if fmt == "bmf":
            assert isinstance(doc, dict) and all("::" in k for k in doc)
        else:
            assert isinstance(doc, list) and all({"name", "unit", "value"} <= set(d) for d in doc)
