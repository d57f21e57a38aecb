"""What a change costs: ``[tool.kbase] gpu_hour_cost`` and ``gpus`` (or ``KBASE_GPU_HOUR_COST`` / ``KBASE_GPUS``,
or ``--gpu-hour-cost`` / ``--fleet-gpus``) make the diff, the gate's outputs (terminal, step summary, PR comment,
JSON) and the API state the change's cost per month: its effect on the iteration x the fleet's GPU-hours per month
x the price — savings for an improvement. The field's own arithmetic holds: 8 GPUs at $1,300 a day, 10% slower,
is about $3,950 a month.
"""

from __future__ import annotations

import json

import pytest

import kbase
from kbase.analysis.cost import HOURS_PER_MONTH, Pricing, change_cost
from kbase.errors import SettingsError

from helpers.cli import run_kbase

PRICE = 1300 / (8 * 24)  # $1,300 a day for 8 GPUs: about $6.77 per GPU-hour


def test_the_fields_arithmetic():
    p = Pricing(gpu_hour_cost=PRICE, gpus=8)
    assert p.gpu_hour_cost == pytest.approx(6.77, abs=0.01)
    assert p.gpu_hours_per_month == pytest.approx(8 * 24 * 30.4)
    assert p.per_month(0.10) == pytest.approx(3952, abs=1)  # "10% is about $4,000 a month"
    assert p.per_month(-0.10) == pytest.approx(-3952, abs=1)  # an improvement saves as much
    assert p.per_month(float("nan")) is None and HOURS_PER_MONTH == pytest.approx(729.6)
    c = change_cost(p, [0.06, 0.04], total_delta_ns=5e6, wall_ns=50e6, total_flagged=False)
    assert (c.basis, c.effect, c.per_month) == ("flagged kernels", pytest.approx(0.10), pytest.approx(3952, abs=1))
    assert c.total_effect == pytest.approx(0.10)
    quiet = change_cost(p, [], total_delta_ns=1e3, wall_ns=50e6, total_flagged=False)
    assert quiet.basis == "nothing beyond noise" and quiet.per_month == 0.0 and quiet.total_per_month > 0
    total = change_cost(p, [], total_delta_ns=2e6, wall_ns=50e6, total_flagged=True)
    assert total.basis == "total kernel time" and total.effect == pytest.approx(0.04)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """Two generated exports: the second has a GEMM 30% slower."""
    from kbase.synth.generate import ExportSpec, generate_export
    from kbase.synth.names import default_kernel_mix

    root = tmp_path_factory.mktemp("cost")
    gemm = next(k.name for k in default_kernel_mix() if k.short_name.startswith("nvjet_hsh_256x128"))
    a = generate_export(root / "a.sqlite", ExportSpec(n_gpus=2, iterations=6, seed=1)).path
    b = generate_export(root / "b.sqlite", ExportSpec(n_gpus=2, iterations=6, seed=2, slowdown={gemm: 1.3})).path
    return a, b, root


def test_diff_json_states_the_cost(pair):
    a, b, _ = pair
    r = run_kbase("diff", a, b, "--format", "json", "--gpu-hour-cost", str(PRICE), "--fleet-gpus", "8")
    assert r.rc == 0, r
    doc = json.loads(r.stdout)
    cost = doc["cost"]
    flagged = [k for k in doc["kernels"] if k["class"] in ("regressed", "improved", "new", "gone") and not k["swap"]]
    assert flagged and cost["basis"] == "flagged kernels"
    effect = sum(k["effect"] for k in flagged)
    assert cost["effect"] == pytest.approx(effect)
    assert cost["per_month"] == pytest.approx(effect * 8 * 24 * 30.4 * PRICE)
    assert (cost["gpus"], cost["gpu_hour_cost"], cost["currency"]) == (8, pytest.approx(PRICE), "$")
    for k in flagged:
        assert k["cost_per_month"] == pytest.approx(k["effect"] * 8 * 24 * 30.4 * PRICE)
    r = run_kbase("diff", a, b, "--format", "json")  # no pricing: no cost fields
    assert "cost" not in json.loads(r.stdout) and "cost_per_month" not in json.loads(r.stdout)["kernels"][0]


def test_terminal_step_summary_comment_and_savings(pair, tmp_path, monkeypatch):
    a, b, _ = pair
    monkeypatch.setenv("KBASE_GPU_HOUR_COST", str(PRICE))
    monkeypatch.setenv("KBASE_GPUS", "8")
    monkeypatch.setenv("COLUMNS", "200")
    summary, comment = tmp_path / "summary.md", tmp_path / "comment.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    r = run_kbase("gate", a, b, "--comment-md", comment)
    assert r.rc == 1, r
    line = next(x for x in r.stdout.splitlines() if x.startswith("cost: "))
    assert line.startswith("cost: +$") and "/month on 8 GPUs at $6.77/GPU-hour (flagged kernels: +" in line
    assert "cost/month" in r.stdout  # the column, per flagged kernel
    assert "cost: +$" in summary.read_text(encoding="utf-8").replace("\\", "")
    text = comment.read_text(encoding="utf-8").replace("\\", "")
    assert "**cost: +$" in text and "| cost/month |" in text
    r = run_kbase("diff", b, a)  # the other way round: an improvement saves
    saving = next(x for x in r.stdout.splitlines() if x.startswith("cost: "))
    assert saving.startswith("cost: -$"), saving


def test_settings_of_the_cost_and_their_errors(tmp_path, pair):
    a, b, _ = pair
    (tmp_path / "pyproject.toml").write_text("[tool.kbase]\ngpu_hour_cost = 6.77\ngpus = 8\n", encoding="utf-8")
    s = kbase.Settings.load(repo=tmp_path, environ={})
    assert s.pricing == Pricing(6.77, 8)
    assert kbase.Settings.load(repo=tmp_path, environ={"KBASE_GPUS": "16"}).pricing.gpus == 16
    assert kbase.Settings.load(repo=tmp_path, environ={}, gpus=4).pricing.gpus == 4
    assert kbase.Settings.load(environ={}).pricing is None  # unset: no cost line
    with pytest.raises(SettingsError):
        kbase.Settings.load(environ={}, gpu_hour_cost=6.77)  # a price without the fleet
    for body, said in (("gpus = 0", "[tool.kbase] gpus = 0"), ("gpus = 8", "gpu_hour_cost is not set"),
                       ('gpus = "8"', "gpus must be a int"),
                       ("gpu_hour_cost = -1.0\ngpus = 8", "gpu_hour_cost = -1.0")):
        (tmp_path / "pyproject.toml").write_text(f"[tool.kbase]\n{body}\n", encoding="utf-8")
        r = run_kbase("diff", a, b, "--repo", tmp_path)
        assert r.rc == 2 and said in r.stderr and len(r.stderr.strip().splitlines()) == 1, r
        assert "Traceback" not in r.stderr
    r = run_kbase("diff", a, b, "--gpu-hour-cost", "7", "--fleet-gpus", "0")
    assert r.rc == 2 and "--fleet-gpus 0" in r.stderr, r
    r = run_kbase("diff", a, b, "--gpu-hour-cost", "nan", "--fleet-gpus", "8")
    assert r.rc == 2 and "--gpu-hour-cost nan: must be a price per GPU-hour above 0" in r.stderr, r
    r = run_kbase("diff", a, b, "--gpu-hour-cost", "7", "--fleet-gpus", "8")
    assert r.rc == 0 and "cost: " in r.stdout, r


def test_the_api_states_the_same_cost(pair):
    a, b, _ = pair
    settings = kbase.Settings.load(environ={}, gpu_hour_cost=PRICE, gpus=8)
    c = kbase.compare(str(a), str(b), settings)
    from kbase.render.diff import diff_doc

    assert c.cost is not None and diff_doc(c)["cost"]["per_month"] == pytest.approx(c.cost.per_month)
    assert "/month at 8 GPUs" in repr(c)
