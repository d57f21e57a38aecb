"""``/regex/`` patterns (acceptances, policy ignore and kernels) are matched in time linear in the name: the
linear-time matcher answers what ``re.search`` answers on every pattern it takes (random patterns and names,
compared), takes a catastrophic pattern on a long name in well under a second, and refuses what has no
linear-time reading; ``kbase accept`` and ``kbase import`` refuse such a pattern in one line."""

from __future__ import annotations

import random
import re
import time

import pytest

ATOMS = ["a", "b", ".", "[ab]", "[^a]", "[a-c_]", "\\d", "\\w", "\\s", "\\W", "(a|b)", "(ab|a)", "(a*)", "(?:ba)",
         "x", "(a|)", "\\.", "<"]
QUANTS = ["", "*", "+", "?", "{2}", "{1,3}", "*?", "{0,2}", "+?", "{2,}"]


def test_it_answers_what_re_answers():
    from kbase.analysis.safe_regex import SafeRegex

    rng = random.Random(39)
    for _ in range(3000):
        p = rng.choice(["", "^"]) + "".join(rng.choice(ATOMS) + rng.choice(QUANTS) for _ in range(rng.randint(1, 4)))
        p += rng.choice(["", "$", "\\Z"])
        if rng.random() < 0.2:
            p = f"({p})|{rng.choice(ATOMS)}"
        r = SafeRegex(p)
        for _ in range(15):
            t = "".join(rng.choice("ab x1\n_.<") for _ in range(rng.randint(0, 9)))
            assert r.search(t) == (re.search(p, t) is not None), (p, t)


@pytest.mark.parametrize("pattern", [r"(a+)+b", r".*a.*a.*a.*b", r"(a|aa)*c", r"(\w+\s?)+$", r"(a*)*b"])
def test_catastrophic_patterns_take_linear_time(pattern):
    from kbase.analysis.safe_regex import SafeRegex

    r = SafeRegex(pattern)
    start = time.perf_counter()
    assert not r.search("a" * 20_000 + "!")
    assert time.perf_counter() - start < 2.0  # re: hours (.*a.*a.*b alone took 16 s on 500 characters)


@pytest.mark.parametrize("pattern,why", [(r"(a)\1", "back-references"), (r"(?=a)b", "look-arounds"),
                                         (r"\bgemm", "\\b"), (r"(?i)gemm", "inline flags"),
                                         (r"a++", "possessive"), (r"(?>a)", "atomic"),
                                         (r"((a{100}){100}){100}", "states")])
def test_what_has_no_linear_reading_is_refused(pattern, why):
    from kbase.analysis.safe_regex import SafeRegex, UnsafePattern

    with pytest.raises(UnsafePattern, match=re.escape(why)):
        SafeRegex(pattern)


def test_policy_matching_uses_it():
    from kbase.policy import name_matches, pattern_mask

    name = "a" * 5000 + "!"
    start = time.perf_counter()
    assert not name_matches("/(a+)+b/", name)
    assert not pattern_mask("/.*a.*a.*b/", [name, name]).any()
    assert name_matches("/^a+!$/", name) and pattern_mask("/a!/", ["xa!", "b"]).tolist() == [True, False]
    assert time.perf_counter() - start < 2.0
    assert not name_matches(r"/(a)\1/", "aa")  # stored before patterns were checked: matches nothing, never hangs


def test_accept_refuses_a_pattern_without_a_linear_reading(tmp_path):
    from helpers.cli import run_kbase
    from helpers.gitrepos import commit, git

    git(tmp_path, "init", "-q", "-b", "main")
    commit(tmp_path, "1", "one")
    r = run_kbase("accept", r"/(?=x)gemm/", "--rev", "HEAD", "--reason", "r", "--db", f"sqlite:///{tmp_path / 'a.db'}",
                  "--repo", tmp_path)
    assert r.rc == 2 and "linear time" in r.stderr and len(r.stderr.strip().splitlines()) == 1, r
