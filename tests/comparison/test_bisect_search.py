"""``kbase bisect``'s search on its own (``comparison.bisect``): which commit it probes, how many probes it
takes, and what it concludes, for every position of the change on a 64-commit line, a partial change, failing
midpoints and a noisy inversion; and the one judgement of a midpoint against both ends."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kbase.comparison.bisect import (
    MidpointVerdict,
    Target,
    TargetKind,
    conclude,
    default_target,
    judge_midpoint,
    next_probe,
    probes_needed,
)

G, B, U, S = MidpointVerdict.GOOD, MidpointVerdict.BAD, MidpointVerdict.UNDECIDED, MidpointVerdict.SKIPPED


def search(n: int, oracle) -> tuple[dict[int, MidpointVerdict], list[int]]:
    verdicts: dict[int, MidpointVerdict] = {}
    order = []
    while (i := next_probe(n, verdicts)) is not None:
        assert 0 < i < n and i not in verdicts, (i, verdicts)
        verdicts[i] = oracle(i)
        order.append(i)
    return verdicts, order


@pytest.mark.parametrize("k", range(1, 64))
def test_a_step_at_every_commit_of_64_is_found_in_six_probes(k):
    verdicts, order = search(63, lambda i: B if i >= k else G)
    end = conclude(63, verdicts)
    assert end.first_bad == k and end.range is None
    assert len(order) <= probes_needed(63) == 6


def test_a_partial_change_is_a_range_from_the_last_good_to_the_first_bad():
    # GOOD .. 19 like GOOD, 20 .. 39 half-way (like neither), 40 .. like BAD
    verdicts, order = search(63, lambda i: G if i < 20 else (U if i < 40 else B))
    end = conclude(63, verdicts)
    assert end.first_bad is None and end.range == (19, 40)
    assert end.undecided and all(20 <= i < 40 for i in end.undecided)
    assert len(order) <= 2 * 6 + 1


def test_a_failing_midpoint_is_skipped_and_its_neighbour_probed():
    verdicts, order = search(63, lambda i: S if i in (31, 32) else (B if i >= 20 else G))
    assert order[:3] == [31, 32, 30]  # the untested commit nearest the middle, lower first on a tie
    assert conclude(63, verdicts).first_bad == 20 and len(order) <= 6 + 2


def test_skipped_commits_next_to_the_change_leave_a_range_listing_them():
    verdicts, _ = search(63, lambda i: S if i in (19, 20) else (B if i >= 20 else G))
    end = conclude(63, verdicts)
    assert end.first_bad is None and end.range == (18, 21) and end.skipped == [19, 20]


def test_every_midpoint_failing_ends_with_the_whole_line_as_the_range():
    verdicts, order = search(8, lambda i: S)
    assert sorted(order) == list(range(1, 8))
    assert conclude(8, verdicts).range == (0, 8)


def test_a_noisy_verdict_never_loops_and_the_answer_follows_what_was_measured():
    verdicts, order = search(63, lambda i: B if i == 31 else (B if i >= 40 else G))
    assert len(order) == len(set(order)) <= 6 and conclude(63, verdicts).first_bad == 31
    # a good verdict above a bad one (an inversion) is ignored: the first bad index bounds the search
    assert conclude(63, {31: B, 40: G, 30: G}).first_bad == 31


def test_one_commit_between_needs_no_probe():
    assert next_probe(1, {}) is None and conclude(1, {}).first_bad == 1


def _diff(rows, ops=None, run_noise=0.002):
    """The parts of a DiffResult the judgement reads: its rows, its ops, its policy."""
    cols = ("class", "name", "short_name", "effect", "gated", "swap")
    return SimpleNamespace(records=lambda: [dict(zip(cols, r)) for r in rows], ops=ops,
                           policy=SimpleNamespace(run_noise=run_noise, fpr=0.02))


K = Target(TargetKind.KERNEL, "gemm*")


@pytest.mark.parametrize(("from_good", "to_bad", "verdict"), [
    ("within_noise", "regressed", G), ("regressed", "unchanged", B), ("regressed_below_floor", "within_noise", B),
    ("regressed", "regressed", U), ("within_noise", "within_noise", U), ("improved", "unchanged", B)])
def test_a_midpoint_is_judged_by_which_end_it_moved_from(from_good, to_bad, verdict):
    vs_good = _diff([(from_good, "gemm_a", "gemm_a", 0.01, True, False), ("regressed", "other", "other", .1, True, False)])
    vs_bad = _diff([(to_bad, "gemm_a", "gemm_a", 0.01, True, False)])
    assert judge_midpoint(vs_good, vs_bad, K) == verdict


def test_a_target_missing_from_a_side_is_undecided_not_a_guess():
    assert judge_midpoint(_diff([]), _diff([("regressed", "gemm_a", "gemm_a", .1, True, False)]), K) == U


def test_the_default_target_is_the_gate_failing_kernel_with_the_largest_effect():
    d = _diff([("regressed_below_floor", "small", "small", 0.004, False, False),
               ("regressed", "big", "big", 0.002, True, False), ("regressed", "swap", "swap", 0.5, True, True)])
    t = default_target(d)
    assert t is not None and t.kind == TargetKind.KERNEL and t.pattern == "big" and t.label == "big"
    assert default_target(_diff([("within_noise", "x", "x", 0.0, False, False)])) is None
