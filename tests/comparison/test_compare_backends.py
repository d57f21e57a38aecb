"""Issue 40: ``kbase diff`` and ``kbase gate`` of stored baselines read the store through its one reader (the
generated statements on sqlite3 or psycopg2). On SQLite and on a PostgreSQL copy of the same store every format,
the files the gate writes, the exit codes and the messages are byte for byte the same — on the demo's store
(a failing gate) and on a generated history (history noise in use; an acceptance turning the failure into a
pass).
"""

from __future__ import annotations

import json
import shutil

import pytest

from helpers.cli import run_kbase

FORMATS = ("table", "json", "md", "csv", "bmf", "github-benchmark")
GATE_FILES = ("junit.xml", "report.json", "comment.md")


@pytest.fixture(scope="module")
def demo(tmp_path_factory, pg_copy_of):
    """The demo's store on SQLite and its PostgreSQL copy: the arguments of each, ``{db}`` for the store."""
    root = tmp_path_factory.mktemp("demo")
    r = run_kbase("demo", "--dir", str(root), "--quiet")
    assert r.rc == 0, r
    url = f"sqlite:///{root / 'kbase.db'}"
    return (url, pg_copy_of(url)), ["--db", "{db}", "--repo", str(root / "repo"), "--name", "demo-train"]


@pytest.fixture(scope="module")
def hist(tmp_path_factory, pg_copy_of):
    """14 commits, one GEMM 15% slower from commit 7; ``acc``: a copy of the store accepting that."""
    from kbase.synth.history import HistorySpec, InjectedStep, _kernel, generate_history

    k = _kernel("nvjet_hsh_256x128")
    spec = HistorySpec(commits=14, steps=[InjectedStep(7, k, 1.15, "gemm: slower tile")], iterations=4)
    h = generate_history(tmp_path_factory.mktemp("hist"), spec)
    acc = h.root / "acc.db"
    shutil.copy(h.root / "kbase.db", acc)
    args = ["--repo", str(h.repo), "--name", h.workload]
    r = run_kbase("accept", "nvjet_hsh_256x128*", "--rev", h.commits[7], "--reason", "known tile change",
                  "--db", f"sqlite:///{acc}", *args)
    assert r.rc == 0, r
    return {"commits": h.commits, "plain": (h.db_url, pg_copy_of(h.db_url)),
            "acc": ((acc_url := f"sqlite:///{acc}"), pg_copy_of(acc_url)), "args": args}


def _both(monkeypatch, tmp_path, stores, args, files=()):
    """(exit code, stdout, stderr, files written) of ``kbase ARGS`` on the SQLite store and on its PostgreSQL
    copy (``stores``; ``{db}`` in ``args``): the same on both."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    out = []
    for i, url in enumerate(stores):
        d = tmp_path / f"run{i}"
        d.mkdir(parents=True)
        r = run_kbase(*[a.format(dir=d, db=url) for a in args])
        written = {f: (d / f).read_bytes() for f in files if (d / f).exists()}
        out.append((r.rc, r.stdout, r.stderr.replace(str(d), "DIR").replace(url, "DB"), written))
    assert out[0] == out[1]
    return out[0]


def _gate_files(*args):
    return [*args, "--junit", "{dir}/junit.xml", "--output", "{dir}/report.json", "--comment-md", "{dir}/comment.md"]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("refs", [("HEAD~1", "HEAD"), ("@1", "@2")])
def test_demo_diff_is_byte_identical(demo, monkeypatch, tmp_path, fmt, refs):
    rc, out, _, _ = _both(monkeypatch, tmp_path, demo[0], ["diff", *refs, *demo[1], "-f", fmt])
    assert rc == 0 and out


@pytest.mark.parametrize("fmt", FORMATS)
def test_demo_failing_gate_is_byte_identical(demo, monkeypatch, tmp_path, fmt):
    rc, _, _, files = _both(monkeypatch, tmp_path, demo[0],
                            _gate_files("gate", "HEAD~1", "HEAD", *demo[1], "-f", fmt), GATE_FILES)
    assert rc == 1 and set(files) == set(GATE_FILES)
    assert json.loads(files["report.json"])["verdict"]["status"] == "fail"


@pytest.mark.parametrize("args", [["diff", "@2", "@1", "--all"], ["diff", "HEAD~1", "-q"], ["gate", "-q"],
                                  ["gate", "@1", "@2", "--warn-only", "--wide"], ["gate", "--full-names", "-f", "md"],
                                  ["gate", "HEAD~1", "HEAD", "--ignore", "*gemm*", "--max-increase-pct", "50"],
                                  ["diff", "@1", "@99"], ["diff", "@1", "@1"], ["gate", "@2", "HEAD"],
                                  ["diff", "no-such-rev", "HEAD"], ["gate", "HEAD", "@x"]])
def test_demo_options_and_errors_are_byte_identical(demo, monkeypatch, tmp_path, args):
    _both(monkeypatch, tmp_path, demo[0], [*args, *demo[1]])


@pytest.mark.parametrize("fmt", FORMATS)
def test_history_noise_diff_is_byte_identical(hist, monkeypatch, tmp_path, fmt):
    c = hist["commits"]
    rc, out, _, _ = _both(monkeypatch, tmp_path, hist["plain"], ["diff", c[6], c[7], "--db", "{db}", *hist["args"],
                                                                 "-f", fmt])
    assert rc == 0
    if fmt == "json":
        assert any(n.startswith("history noise: ") for n in json.loads(out)["notes"])


@pytest.mark.parametrize("store", ["plain", "acc"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_history_gate_with_and_without_acceptance_is_byte_identical(hist, monkeypatch, tmp_path, store, fmt):
    c = hist["commits"]
    rc, _, _, files = _both(monkeypatch, tmp_path, hist[store],
                            _gate_files("gate", c[6], c[7], "--db", "{db}", *hist["args"], "-f", fmt), GATE_FILES)
    doc = json.loads(files["report.json"])
    assert any(n.startswith("history noise: ") for n in doc["notes"])
    if store == "plain":
        assert rc == 1 and doc["verdict"]["status"] == "fail"
    else:
        assert rc == 0 and doc["verdict"]["accepted"], doc["verdict"]


@pytest.mark.parametrize("args", [["gate", "HEAD~1", "HEAD"], ["diff", "@3", "@10", "-f", "json"],
                                  ["gate", "HEAD~6", "--history-ref", "main", "-f", "json"],
                                  ["diff", "HEAD~9", "HEAD", "--base-ref", "HEAD~3", "-f", "md"],
                                  ["gate", "@6", "@9", "-q"], ["diff", "@8", "@7", "--strict"]])
def test_history_revisions_and_ids_are_byte_identical(hist, monkeypatch, tmp_path, args):
    for store in ("plain", "acc"):
        _both(monkeypatch, tmp_path / store, hist[store], [*args, "--db", "{db}", *hist["args"]])
