"""`kbase steps` and `kbase history` on a generated store with a known step; launch sketches in the store."""

import json

import numpy as np
import pytest

from tests.conftest import kb


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
    from kbase.store.queries import load_leaderboard

    h, kernel = hist
    s = kbase.Settings.load(repo=h.repo, db=h.db_url, name=h.workload)
    g = kbase.gate(h.commits[12], h.commits[13], s)
    assert any(n.startswith("history noise: ") for n in g.comparison.notes)
    assert "history" in set(g.comparison.result.rows["noise_source"].dropna())
    assert g.verdict.code == 0
    with kbase.api._store(s, None) as st:
        lb = load_leaderboard(st.engine, h.baseline_ids[-1])
    assert lb.sketches and all(v.shape == (8, 18) for v in lb.sketches.values())


def test_old_baselines_without_sketches_still_compare(hist, tmp_path):
    import shutil

    from sqlalchemy import text

    import kbase

    h, kernel = hist
    db = tmp_path / "old.db"
    shutil.copyfile(h.db_url.removeprefix("sqlite:///"), db)
    s = kbase.Settings.load(repo=h.repo, db=f"sqlite:///{db}", name=h.workload)
    with kbase.api._store(s, None) as st, st.engine.begin() as conn:
        conn.execute(text("UPDATE baseline_kernel SET launch_sketch = NULL"))
    g = kbase.gate(h.commits[6], h.commits[7], s)
    rows = g.comparison.result.rows
    assert g.verdict.code == 1 and rows.iloc[0]["name"] == kernel
    assert "launches" not in set(rows["noise_source"].dropna())
    assert np.isfinite(rows.iloc[0]["mde_rel"])
