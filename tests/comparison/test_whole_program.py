"""Captures without iteration markers that span their whole program (``analysis.span``): one run of the program's
work each, compared per run even when their launch counts differ, with the reason on every surface; and history
noise per run, from stored markerless baselines (docs/diff.md "Units")."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import kbase
from kbase.api.comparing import _decide
from kbase.comparison.side import Unit
from kbase.enums import GateStatus, KernelClass
from kbase.render.comment import comment_markdown
from kbase.render.diff import diff_doc, verdict_lines
from kbase.render.report.pages import diff_page
from kbase.synth.fixed_work import FixedKernel, FixedWorkSpec, generate_fixed_work

from helpers.cli import run_kbase

STENCIL = FixedKernel("void stencil_kernel<float>(float const*, float*, int)", "stencil_kernel", 800, 250_000)
# a new block size: twice the launches, each doing half the work
STENCIL_SPLIT = replace(STENCIL, launches=1600, first_ns=125_000)
HELPER = FixedKernel("void init_kernel(int*, int)", "init_kernel", 400, 20_000)
PROGRAM_WHY = "no iteration markers; both captures span their whole program"


def _gen(tmp: Path, name: str, kernels: list[FixedKernel], **kw) -> str:
    return str(generate_fixed_work(tmp / name, FixedWorkSpec(kernels=kernels, **kw), overwrite=True))


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    return kbase.Settings.load(repo=tmp_path_factory.mktemp("norepo"))


def _gate(a: str, b: str, settings):
    comparison = kbase.compare(a, b, settings)
    return comparison, _decide(comparison, [], False, False).verdict


def _row(comparison, short: str) -> dict:
    return next(r for r in comparison.result.records() if r["short_name"] == short)


def test_whole_programs_whose_launch_counts_changed_compare_per_run(tmp_path, settings):
    a = _gen(tmp_path, "a.sqlite", [STENCIL, HELPER], seed=1)
    b = _gen(tmp_path, "b.sqlite", [STENCIL_SPLIT, HELPER], seed=2)
    same, verdict = _gate(a, b, settings)
    assert same.result.totals.unit == Unit.RUN and same.result.totals.unit_reason == PROGRAM_WHY
    assert f"unit: the run ({PROGRAM_WHY}): totals per capture, launches paired by ordinal where counts match" \
        in same.result.notes
    assert _row(same, "stencil_kernel")["class"] in (KernelClass.UNCHANGED, KernelClass.WITHIN_NOISE)
    assert verdict.status == GateStatus.PASS
    slower = _gen(tmp_path, "c.sqlite", [STENCIL_SPLIT, HELPER], seed=2, slowdown={STENCIL.name: 1.2})
    slow, verdict = _gate(a, slower, settings)
    row = _row(slow, "stencil_kernel")
    assert slow.result.totals.unit == Unit.RUN
    assert row["class"] == KernelClass.REGRESSED and row["delta_pct"] == pytest.approx(20, abs=1.5)
    assert verdict.status == GateStatus.FAIL


def test_without_the_span_the_same_pair_is_compared_per_window_second(tmp_path, settings):
    """An export that does not say how its capture began (older exporters): the launch counts decide, as before."""
    a = _gen(tmp_path, "a.sqlite", [STENCIL, HELPER], seed=1, capture="none")
    b = _gen(tmp_path, "b.sqlite", [STENCIL_SPLIT, HELPER], seed=2, capture="none")
    comparison, _ = _gate(a, b, settings)
    assert comparison.result.totals.unit == Unit.WINDOW_SECOND
    assert comparison.result.totals.unit_reason == ("no iteration markers; launch counts differ and the captures do "
                                                    "not both span their program")


def test_a_slice_of_a_steady_state_still_gets_the_window_second(tmp_path, settings):
    """Cut by a clock (--delay, --duration): its launch counts are an accident of where, even when they match."""
    for kernels in ([STENCIL, HELPER], [STENCIL_SPLIT, HELPER]):
        a = _gen(tmp_path, "a.sqlite", [STENCIL, HELPER], seed=1, slice_ns=60_000_000)
        b = _gen(tmp_path, "b.sqlite", kernels, seed=2, slice_ns=60_000_000)
        comparison, _ = _gate(a, b, settings)
        why = comparison.result.totals.unit_reason
        assert comparison.result.totals.unit == Unit.WINDOW_SECOND
        assert why.startswith("no iteration markers; ") and "is a slice (" in why and "a start delay" in why, why
    whole = _gen(tmp_path, "w.sqlite", [STENCIL, HELPER], seed=3)  # a whole program against a slice of one
    assert _gate(a, whole, settings)[0].result.totals.unit == Unit.WINDOW_SECOND


def test_a_range_the_program_marks_is_judged_by_its_launch_counts(tmp_path, settings):
    """cudaProfilerStart/Stop around a benchmark's loop: the same work when the launches match, else not a run."""
    a = _gen(tmp_path, "a.sqlite", [STENCIL, HELPER], seed=1, capture="range")
    same = _gen(tmp_path, "b.sqlite", [STENCIL, HELPER], seed=2, capture="range")
    assert _gate(a, same, settings)[0].result.totals.unit_reason == "no iteration markers; the same launches per capture"
    split = _gen(tmp_path, "c.sqlite", [STENCIL_SPLIT, HELPER], seed=2, capture="range")
    assert _gate(a, split, settings)[0].result.totals.unit == Unit.WINDOW_SECOND


def test_every_surface_that_names_the_unit_says_why(tmp_path, settings):
    a = _gen(tmp_path, "a.sqlite", [STENCIL, HELPER], seed=1)
    b = _gen(tmp_path, "b.sqlite", [STENCIL_SPLIT, HELPER], seed=2, slowdown={STENCIL.name: 1.2})
    text = run_kbase("gate", a, b, "--repo", tmp_path, "--junit", tmp_path / "k.xml")
    # (piped output wraps at COLUMNS or 100 columns: the words, not the line breaks, are the claim)
    assert text.rc == 1 and f"unit: the run ({PROGRAM_WHY})" in " ".join(text.stdout.split()), text
    assert f'<property name="unit_reason" value="{PROGRAM_WHY}"/>' in (tmp_path / "k.xml").read_text()
    doc = json.loads(run_kbase("diff", a, b, "--repo", tmp_path, "-f", "json").stdout)
    assert doc["unit"] == "run" and doc["unit_reason"] == PROGRAM_WHY == doc["totals"]["unit_reason"]
    comparison, verdict = _gate(a, b, settings)
    doc = diff_doc(comparison, verdict)
    assert f"times are per run per GPU ({PROGRAM_WHY})" in comment_markdown(doc)
    assert f"per run per GPU ({PROGRAM_WHY})" in diff_page(doc)[0]
    assert f"per run per GPU ({PROGRAM_WHY})" in repr(comparison)
    asked = run_kbase("diff", a, b, "--repo", tmp_path, "--unit", "window", "-f", "json")
    assert json.loads(asked.stdout)["unit_reason"] == "asked for: --unit window"


# --------------------------------------------------------------------------- history noise per run

SOLO = FixedKernel("void dp_kernel<256>(int*, int const*, int)", "dp_kernel", 1, 40_000_000, jitter=0.005)


def _history_gate(tmp_path: Path, past: int, slowdown: float, seed: int = 99, unit: str | None = None, **kw):
    """``past`` markerless baselines of a solver (one launch of its main kernel) at successive commits, then a
    candidate at the next commit (``slowdown`` on that kernel); the gate between the last two."""
    from kbase.store import open_store

    from helpers.gitrepos import commit, git

    repo = tmp_path / "repo"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    settings = kbase.Settings.load(repo=repo, db=f"sqlite:///{tmp_path / 'kbase.db'}", name="solver")
    kernels = [SOLO, HELPER]
    with open_store(settings) as st:
        for i in range(past):
            commit(repo, f"v{i}\n", f"v{i}")
            kbase.snapshot(_gen(tmp_path, f"r{i}.sqlite", kernels, seed=i + 1, **kw), settings, store=st)
        commit(repo, "candidate\n", "candidate")
        kbase.snapshot(_gen(tmp_path, "c.sqlite", kernels, seed=seed, slowdown={SOLO.name: slowdown}, **kw),
                       settings, store=st)
        if unit:
            settings = replace(settings, policy=replace(settings.policy, unit=unit))
        return kbase.gate("HEAD~1", "HEAD", settings, store=st)


def test_a_history_of_markerless_baselines_judges_a_single_launch(tmp_path):
    slower = _history_gate(tmp_path, 6, 1.2)
    row = _row(slower.comparison, "dp_kernel")
    assert row["class"] == KernelClass.REGRESSED and row["noise_source"] == "history", row
    assert row["run_noise_source"] == "history" and row["mde_rel"] < 0.2
    assert slower.verdict.status == GateStatus.FAIL
    lines = "\n".join(verdict_lines(slower.verdict))
    assert "regression: dp_kernel" in lines and "noise from history (past baselines' spread)" in lines
    notes = slower.comparison.notes
    assert any(n.startswith("history noise per run: 6 past baselines without iteration markers") and
               "(6 spanning their whole program)" in n for n in notes), notes


@pytest.mark.parametrize("seed", [99, 100, 101, 102])
def test_an_unchanged_candidate_against_a_quiet_history_stays_quiet(tmp_path, seed):
    same = _history_gate(tmp_path, 6, 1.0, seed=seed)
    row = _row(same.comparison, "dp_kernel")
    assert row["noise_source"] == "history" and row["class"] in (KernelClass.UNCHANGED, KernelClass.WITHIN_NOISE)
    assert same.verdict.status == GateStatus.PASS, verdict_lines(same.verdict)


def test_a_history_too_short_leaves_a_single_launch_unjudged(tmp_path):
    """Three past baselines, under min_history (5): nothing measured the kernel's run-to-run noise."""
    short = _history_gate(tmp_path, 3, 1.2)
    assert _row(short.comparison, "dp_kernel")["class"] == KernelClass.CANNOT_JUDGE


def test_run_levels_judge_only_comparisons_per_run(tmp_path):
    """Asked for per window-second, history's levels per run are not the comparison's: the diff says so. Slices
    give no run levels at all (a clock cut them)."""
    asked = _history_gate(tmp_path / "asked", 6, 1.0, unit="window").comparison.result
    assert asked.totals.unit == Unit.WINDOW_SECOND
    assert "history" not in {r["noise_source"] for r in asked.records()}
    assert any(n.startswith("history noise not used: its levels are per run") for n in asked.notes), asked.notes
    sliced = _history_gate(tmp_path / "sliced", 6, 1.0, slice_ns=60_000_000).comparison
    assert sliced.result.totals.unit == Unit.WINDOW_SECOND
    assert any("(0 spanning their whole program)" in n and "(0 kernels with at least 5 levels)" in n
               for n in sliced.notes), sliced.notes
