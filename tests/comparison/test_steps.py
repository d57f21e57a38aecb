"""`kbase steps` and `kbase history` on a generated store with a known step; launch sketches in the store."""

import json

import numpy as np
import pytest

from helpers.cli import kb


@pytest.fixture(scope="module")
def hist(tmp_path_factory):
    from kbase.synth.history import HistorySpec, InjectedStep, _kernel, generate_history

    k = _kernel("nvjet_hsh_256x128")
    spec = HistorySpec(commits=14, steps=[InjectedStep(7, k, 1.15, "gemm: slower tile")], iterations=4)
    return generate_history(tmp_path_factory.mktemp("hist"), spec), k


def test_steps_json_lists_the_step_at_its_commit(hist):
    h, kernel = hist
    r = kb("steps", "--db", h.db_url, "--repo", h.repo, "--name", h.workload, "--format", "json")
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    assert doc["schema"] == "kbase.steps/1" and doc["baselines"] == 14
    top = doc["steps"][0]
    assert top["name"] == kernel and top["kind"] == "step"
    assert top["from_commit"] == h.commits[6] and top["to_commit"] == h.commits[7]
    assert top["rel"] == pytest.approx(0.15, abs=0.03) and top["effect"] > 0
    effects = [abs(s["effect"]) for s in doc["steps"]]
    assert effects == sorted(effects, reverse=True)


def test_steps_table_and_history_show_the_step(hist, monkeypatch):
    h, kernel = hist
    monkeypatch.setenv("COLUMNS", "200")  # the commit columns fit whatever width the test runs at
    r = kb("steps", "--db", h.db_url, "--repo", h.repo, "--name", h.workload)
    assert r.rc == 0 and "step" in r.stdout and h.commits[7][:10] in r.stdout, r
    r = kb("history", kernel, "--db", h.db_url, "--repo", h.repo, "--name", h.workload)
    assert r.rc == 0 and f"{h.commits[6][:10]}..{h.commits[7][:10]}" in r.stdout, r


def test_gate_uses_history_noise_and_stored_sketches(hist):
    import kbase

    h, kernel = hist
    s = kbase.Settings.load(repo=h.repo, db=h.db_url, name=h.workload)
    g = kbase.gate(h.commits[12], h.commits[13], s)
    assert any(n.startswith("history noise: ") for n in g.comparison.notes)
    assert "history" in set(g.comparison.result.rows["noise_source"].dropna())
    assert g.verdict.code == 0
    from kbase.analysis.sketch import COUNT

    with kbase.api._store(s, None, readonly=True) as st:
        sketches = st.reader.kernel_table(h.baseline_ids[-1]).sketches
    assert sketches is not None and sketches.shape[1:] == (8, 18) and (sketches[:, :, COUNT] > 0).any()


@pytest.mark.slow
def test_history_noise_leaves_out_baselines_without_step_markers(tmp_path):
    """A baseline without iteration markers stores no per-iteration level: among aligned baselines it
    is left out of the history noise (it counted as a level of 0), and a workload captured without
    markers compares per run on its history of totals per capture (the same launches), catching a +15% step."""
    import kbase
    from kbase.synth.generate import ExportSpec, generate_export
    from kbase.synth.history import HistorySpec, InjectedStep, _kernel, generate_history

    k = _kernel("nvjet_hsh_256x128")
    h = generate_history(tmp_path / "aligned", HistorySpec(commits=8, steps=[], iterations=4))
    s = kbase.Settings.load(repo=h.repo, db=h.db_url, name=h.workload)
    for i in (2, 3, 4):  # the same workload captured once more at three commits, without markers
        path = tmp_path / f"unmarked{i}.sqlite"
        generate_export(path, ExportSpec(iterations=4, seed=50 + i, nvtx=False))
        assert not kbase.snapshot(path, s, rev=h.commits[i]).baseline.aligned
    c = kbase.compare(f"@{h.baseline_ids[6]}", f"@{h.baseline_ids[7]}", s)
    assert "history noise: 7 past baselines on the before side's first-parent line (22 kernels with at least 5 " \
           "levels)" in c.notes, c.notes
    assert set(c.result.rows["noise_source"].dropna()) == {"history"} and c.result.rows["noise_rel"].max() < 0.05

    steps = kbase.steps(s)
    assert steps.baselines == 8 and any("3 baseline(s) left out: captured without iteration markers" in n
                                        for n in steps.notes), steps.notes

    u = generate_history(tmp_path / "unmarked", HistorySpec(commits=9, steps=[InjectedStep(8, k, 1.15, "gemm")],
                                                            iterations=4, markers=False))
    s = kbase.Settings.load(repo=u.repo, db=u.db_url, name=u.workload)
    steps = kbase.steps(s)
    assert steps.baselines == 0 and steps.steps == [] and any("9 baseline(s) left out" in n for n in steps.notes)
    g = kbase.gate(u.commits[7], u.commits[8], s)
    assert not g.comparison.before.side.aligned and g.comparison.result.totals.unit == "run"  # the same work
    assert set(g.comparison.result.rows["noise_source"].dropna()) == {"history"}
    assert any(n.startswith("history noise per run: 8 past baselines without iteration markers") for n in
               g.comparison.notes), g.comparison.notes
    assert g.verdict.code == 1 and [f.name for f in g.verdict.failing if f.kind == "regressed"] == [k]


def test_old_baselines_without_sketches_still_compare(hist, tmp_path):
    import shutil

    from sqlalchemy import text

    import kbase

    h, kernel = hist
    db = tmp_path / "old.db"
    shutil.copyfile(h.db_url.removeprefix("sqlite:///"), db)
    s = kbase.Settings.load(repo=h.repo, db=f"sqlite:///{db}", name=h.workload)
    with kbase.api._store(s, None) as st, st.engine.begin() as conn:
        conn.execute(text("UPDATE baseline_kernels SET sketches = NULL"))
    g = kbase.gate(h.commits[6], h.commits[7], s)
    rows = g.comparison.result.rows
    assert g.verdict.code == 1 and rows.iloc[0]["name"] == kernel
    assert "launches" not in set(rows["noise_source"].dropna())
    assert np.isfinite(rows.iloc[0]["mde_rel"])


def test_history_json_and_csv_carry_the_step(hist):
    import csv
    import io

    h, kernel = hist
    base = ("history", kernel, "--db", h.db_url, "--repo", h.repo, "--name", h.workload)
    r = kb(*base, "--format", "json")
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    steps = doc["steps"]
    assert [s["kind"] for s in steps] == ["step"], steps
    assert steps[0]["from_commit"] == h.commits[6] and steps[0]["to_commit"] == h.commits[7]
    assert steps[0]["rel"] == pytest.approx(0.15, abs=0.03)
    assert steps[0]["effect"] is None  # one kernel's history knows no iteration wall: null, not NaN
    r = kb(*base, "--format", "csv")
    assert r.rc == 0, r
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    marked = [row for row in rows if row["step"]]
    assert len(marked) == 1 and marked[0]["commit"] == h.commits[7], marked
    assert marked[0]["step"].startswith("step +1")


def test_history_over_several_workloads_says_steps_were_not_computed():
    from datetime import UTC, datetime

    from kbase.api import KernelHistory, history_steps
    from kbase.render.history import history_csv, history_doc

    def row(i, workload):
        return {"id": i, "commit": f"{i:040x}", "created_at": datetime(2026, 1, 1, tzinfo=UTC), "workload": workload,
                "branch": "main", "count": 1, "total_ns": 10, "avg_ns": 10.0, "per_iter_ns": 10.0 + i,
                "share_window": 0.1}

    h = KernelHistory(query="k", name="k", short_name="k", rows=[row(1, "a"), row(2, "b"), row(3, "a")])
    found = history_steps(h)
    assert found is None
    doc = history_doc(h, steps=found)
    assert doc["steps"] is None and "several workloads" in doc["steps_note"]
    assert history_csv(h, found).splitlines()[0].endswith(",step")


def test_steps_table_prints_kernel_names_as_text(monkeypatch):
    import io

    from rich.console import Console

    from kbase.comparison.changepoints import KernelStep
    from kbase.comparison.history import StepsReport
    from kbase.render.steps import print_steps

    evil = "[link=http://e.vil]x[/link] \x1b[31m"
    s = KernelStep(name=evil, short_name=evil, kind="step", from_commit="a" * 40, to_commit="b" * 40,
                   first_commit="b" * 40, before_ns=1e5, after_ns=1.1e5, rel=0.1, effect=0.01, steps=1, z=9.0)
    buf = io.StringIO()
    print_steps(StepsReport(workload="[bold]w", commits=["a" * 40, "b" * 40], baselines=2, steps=[s]),
                Console(file=buf, force_terminal=False, width=200))  # no colour: any ESC would come from a name
    out = buf.getvalue()
    assert "[link=http://e.vil]" in out and "\x1b" not in out
    assert "[bold]w" in out


def test_history_noise_follows_the_named_base_line(hist):
    import kbase

    h, _ = hist
    s = kbase.Settings.load(repo=h.repo, db=h.db_url, name=h.workload)
    notes = kbase.compare(h.commits[12], h.commits[13], s).notes
    assert "history noise: 13 past baselines on the before side's first-parent line" in " ".join(notes), notes
    # a base branch named by policy: only its line (commits 0..5 here) gives the noise
    s = kbase.Settings.load(repo=h.repo, db=h.db_url, name=h.workload, policy={"history_ref": h.commits[5]})
    notes = " ".join(kbase.compare(h.commits[12], h.commits[13], s).notes)
    assert f"history noise: 6 past baselines on {h.commits[5]}'s first-parent line" in notes, notes
    # --base-ref names the base branch for the gate: its whole line, not only up to the merge-base
    r = kb("gate", h.commits[13], "--base-ref", h.commits[8], "--db", h.db_url, "--repo", h.repo, "--name",
           h.workload, "--format", "json")
    doc = json.loads(r.stdout)
    assert any(f"9 past baselines on {h.commits[8]}'s" in n for n in doc["notes"]), doc["notes"]
    # an unknown ref in the policy is said, and the before side's line used; asked for by flag: exit 2
    s = kbase.Settings.load(repo=h.repo, db=h.db_url, name=h.workload, policy={"history_ref": "no-such-branch"})
    notes = kbase.compare(h.commits[12], h.commits[13], s).notes
    assert any("no-such-branch is not a revision" in n for n in notes) and any("before side's" in n for n in notes)
    for cmd in ("diff", "gate"):
        r = kb(cmd, h.commits[12], h.commits[13], "--history-ref", "no-such-branch", "--db", h.db_url, "--repo",
               h.repo, "--name", h.workload, "--format", "json")
        assert r.rc == 2 and r.stdout == "" and "--history-ref" in r.stderr and "no-such-branch" in r.stderr, r
        assert len(r.stderr.strip().splitlines()) == 1, r
    # the flag wins over --base-ref
    r = kb("gate", h.commits[13], "--base-ref", h.commits[8], "--history-ref", h.commits[4], "--db", h.db_url,
           "--repo", h.repo, "--name", h.workload, "--format", "json")
    assert any(f"5 past baselines on {h.commits[4]}'s" in n for n in json.loads(r.stdout)["notes"]), r


def test_commit_levels_is_the_per_commit_mean_of_finite_levels():
    from kbase.comparison.changepoints import commit_levels

    rng = np.random.default_rng(3)
    for _ in range(30):
        n, k = int(rng.integers(0, 80)), int(rng.integers(1, 4))
        commits = [f"c{int(x)}" for x in rng.integers(0, max(1, n // 3 + 1), n)]
        levels = rng.normal(100, 5, (k, n))
        levels[rng.random((k, n)) < 0.25] = np.nan
        got, order = commit_levels(levels, commits)
        assert order == list(dict.fromkeys(commits))
        for j, c in enumerate(order):
            block = levels[:, [i for i, x in enumerate(commits) if x == c]]
            for row in range(k):
                finite = block[row][np.isfinite(block[row])]
                want = finite.mean() if len(finite) else np.nan
                assert np.isclose(got[row][j], want, equal_nan=True)


def test_history_table_shows_the_newest_rows_and_json_one_baseline_per_line(hist):
    h, kernel = hist
    base = ("history", kernel, "--db", h.db_url, "--repo", h.repo, "--name", h.workload)
    r = kb(*base, "-n", "3")
    assert r.rc == 0 and "the newest 3 of 14 baselines" in r.stdout, r
    assert f"@{h.baseline_ids[-1]}" in r.stdout and f"@{h.baseline_ids[0]} " not in r.stdout
    r = kb(*base, "-n", "2", "--format", "json")
    doc = json.loads(r.stdout)
    assert [b["id"] for b in doc["baselines"]] == h.baseline_ids[-2:] and doc["steps"], doc
    lines = r.stdout.splitlines()
    assert sum(line.startswith('    {"id": ') for line in lines) == 2
