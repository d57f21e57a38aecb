"""Views that agree on one pair (issue 38, point 2), read as a person reads them.

- Captures without iteration markers whose ranges say which op launched each kernel: ``kbase diff --by op``
  shows the ops as ``kbase top --by op`` does (per run: the diff's unit), on the real FSDP T5 export of
  ../shared/data (an H100 pair: the export and a copy whose top GEMM is 30% slower) and on generated ones.
- The report's default diff page is the latest pair of commits that differs: the same file stored at the last
  two commits does not hide the change before it, and the page's verdict is ``kbase gate``'s of that pair.
"""

from __future__ import annotations

import html
import json
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest

from helpers.cli import run_kbase
from helpers.gitrepos import commit, git
from helpers.shared import require_shared

pytestmark = pytest.mark.slow

@pytest.fixture(autouse=True)
def _wide(monkeypatch):
    """What these outputs say, not how wide they are: notes and tables unwrapped at 200 columns (piped output is
    100 wide without COLUMNS)."""
    monkeypatch.setenv("COLUMNS", "200")


def _slower(src: Path, dst: Path, factor: float) -> str:
    """A copy of ``src`` whose top kernel (by total time) runs ``factor`` times as long; its name."""
    shutil.copyfile(src, dst)
    con = sqlite3.connect(dst)
    try:
        top, = con.execute("SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY demangledName "
                           "ORDER BY SUM(end - start) DESC LIMIT 1").fetchone()
        con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start + CAST(ROUND((end - start) * ?) AS INTEGER) "
                    "WHERE demangledName = ?", (factor, top))
        con.commit()
        name, = con.execute("SELECT value FROM StringIds WHERE id = ?", (top,)).fetchone()
    finally:
        con.close()
    return str(name)


def _ops_of_top(path: Path, db: str) -> set[str]:
    r = run_kbase("top", path, "--by", "op", "--format", "json", "--db", db)
    assert r.rc == 0, r
    return {o["op"] for o in json.loads(r.stdout)["ops"] if o["op"]}


def _diff_by_op(before: Path | str, after: Path | str, db: str, *extra: str) -> tuple[str, dict]:
    text = run_kbase("diff", before, after, "--by", "op", "--db", db, *extra)
    assert text.rc == 0, text
    doc = run_kbase("diff", before, after, "--by", "op", "--format", "json", "--db", db, *extra)
    assert doc.rc == 0, doc
    return text.stdout, json.loads(doc.stdout)


def test_real_markerless_nsys_pair_diff_by_op_shows_the_ops_top_lists(tmp_path):
    """The real FSDP T5 export (no iteration marker; emit_nvtx op ranges): top --by op lists its ops; diff --by
    op of it against a copy with its top GEMM 30% slower shows them too, the GEMM's op grown, per window-second
    (the export was cut from a longer capture: a slice, ``analysis.span``)."""
    before = tmp_path / "t5_before.sqlite"
    shutil.copyfile(require_shared("h100_2gpu_fsdp_t5.sqlite"), before)
    after = tmp_path / "t5_after.sqlite"
    gemm = _slower(before, after, 1.3)
    db = f"sqlite:///{tmp_path / 'k.db'}"
    listed = _ops_of_top(before, db)
    assert "aten::mm" in listed
    text, doc = _diff_by_op(before, after, db)
    assert "no op information" not in text
    assert "Diff by op (per window-second per GPU" in text and "before/s" in text
    assert doc["unit"] == "window-second" and doc["ops"] is not None
    ops = {o["op"]: o for o in doc["ops"]}
    assert set(ops) <= listed | {None} and "aten::mm" in ops
    mm = ops["aten::mm"]
    assert mm["delta_ns"] > 0 and mm["class"] in ("regressed", "regressed_below_floor")
    assert any(k["name"] == gemm for k in mm["kernel_rows"])
    same_text, same = _diff_by_op(before, before, db)  # the same file twice: every op unchanged
    assert "no op information" not in same_text and all(o["delta_ns"] == 0 for o in same["ops"])


def test_generated_markerless_pair_diff_by_op_from_the_store(tmp_path):
    """Generated exports without an iteration marker (their ranges are op ranges only), stored at two commits:
    ``kbase diff HEAD~1 HEAD --by op`` judges the slowed kernel's op per run, as top --by op lists the ops."""
    from kbase.synth.generate import ExportSpec, generate_export
    from kbase.synth.names import default_kernel_mix

    flash = next(k.name for k in default_kernel_mix() if k.short_name == "flash_fwd_kernel")
    repo, db = tmp_path / "repo", f"sqlite:///{tmp_path / 'k.db'}"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    for i, slow in enumerate((1.0, 1.3)):  # "block N" ranges: no iteration marker kbase knows
        generate_export(tmp_path / f"g{i}.sqlite", ExportSpec(n_gpus=1, iterations=6, seed=i, marker="block{i}"),
                        slowdown={flash: slow})
        commit(repo, f"x = {i}\n", f"commit {i}")
        r = run_kbase("snapshot", tmp_path / f"g{i}.sqlite", "--db", db, "--repo", repo, "--name", "gen", "-q")
        assert r.rc == 0 and "NOT iteration-aligned" in r.stdout, r
    listed = _ops_of_top(tmp_path / "g0.sqlite", db)
    text, doc = _diff_by_op("HEAD~1", "HEAD", db, "--repo", str(repo), "--name", "gen")
    assert "no op information" not in text and doc["ops"] is not None and doc["unit"] == "run"
    grown = [o for o in doc["ops"] if any(k["name"] == flash for k in o["kernel_rows"])]
    assert grown and all(o["op"] in listed for o in grown) and sum(o["delta_ns"] for o in grown) > 0


def _stored_history(tmp_path: Path, slows: list[float], files: list[int]) -> tuple[Path, str, list[str]]:
    """A repository with one commit per entry of ``files`` (which generated export it stores: by index into
    ``slows``, the flash_fwd slowdown of each export)."""
    from kbase.synth.generate import ExportSpec, generate_export
    from kbase.synth.names import default_kernel_mix

    flash = next(k.name for k in default_kernel_mix() if k.short_name == "flash_fwd_kernel")
    exports = []
    for i, s in enumerate(slows):
        generate_export(tmp_path / f"e{i}.sqlite", ExportSpec(n_gpus=2, iterations=8, seed=1 + i), slowdown={flash: s})
        exports.append(tmp_path / f"e{i}.sqlite")
    repo, db = tmp_path / "repo", f"sqlite:///{tmp_path / 'k.db'}"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commits = []
    for n, f in enumerate(files):
        commits.append(commit(repo, f"step = {n}\n", f"train: commit {n}"))
        r = run_kbase("snapshot", exports[f], "--db", db, "--repo", repo, "--name", "train", "-q")
        assert r.rc == 0, r
    return repo, db, commits


def test_report_default_diff_is_the_latest_pair_that_differs(tmp_path):
    """flash_fwd 25% slower at commit 2; commit 3 stores the very same file again (a docs-only commit): the
    report's diff page is 1 -> 2, says why, and states kbase gate's verdict of that pair."""
    repo, db, commits = _stored_history(tmp_path, [1.0, 1.25], [0, 1, 1])
    out = tmp_path / "site"
    r = run_kbase("report", "--out", out, "--db", db, "--repo", repo, "--name", "train", "-q")
    assert r.rc == 0, r
    page = (out / "diff.html").read_text(encoding="utf-8")
    assert commits[0][:12] in page and commits[1][:12] in page
    assert "the latest pair of commits whose gate shows a change" in page
    assert f"{commits[1][:12]} -&gt; {commits[2][:12]} (the same capture(s) at both commits)" in page
    gate = run_kbase("gate", commits[0], commits[1], "--db", db, "--repo", repo, "--name", "train", "--format", "json")
    verdict = json.loads(gate.stdout)["verdict"]
    assert gate.rc == 1 and verdict["status"] == "fail", gate
    assert f'class="verdict fail">gate: FAIL (exit {verdict["code"]})' in page  # the gate's verdict, its reasons
    assert verdict["reasons"] and all(html.escape(reason, quote=True) in page for reason in verdict["reasons"])
    assert "flash_fwd_kernel" in page
    # named sides are taken as named: --before/--after still give the latest pair, "no change"
    r = run_kbase("report", "--out", tmp_path / "named", "--db", db, "--repo", repo, "--name", "train", "-q",
                  "--before", "-2", "--after", "-1")
    assert r.rc == 0
    named = (tmp_path / "named" / "diff.html").read_text(encoding="utf-8")
    assert commits[2][:12] in named and "No change" in named


def test_report_without_any_change_shows_the_latest_pair_and_says_so(tmp_path):
    repo, db, commits = _stored_history(tmp_path, [1.0], [0, 0])
    out = tmp_path / "site"
    assert run_kbase("report", "--out", out, "--db", db, "--repo", repo, "--name", "train", "-q").rc == 0
    page = (out / "diff.html").read_text(encoding="utf-8")
    assert commits[1][:12] in page and "none of the 1 newest pair(s) of commits shows a change" in page
    assert subprocess.run(["git", "-C", str(repo), "status", "--porcelain"], capture_output=True, text=True,
                          check=True).stdout == ""
