"""The gate's acceptance index answers exactly what a scan of every acceptance in order answers (the first whose
pattern matches one of a finding's names), for exact names, globs and ``/regex/`` mixed; and the acceptances'
commits are placed in the compared range by one ``git rev-list``, as ``is_ancestor`` twice per commit did."""

from __future__ import annotations

import random
from types import SimpleNamespace

from helpers.gitrepos import commit, git


def test_the_index_finds_what_a_scan_finds():
    from kbase.comparison.gate import AcceptanceIndex
    from kbase.policy import name_matches

    rng = random.Random(39)
    names = [f"k{i}" for i in range(30)] + ["gemm_[x]", "a*b", "/x/"]
    shapes = [lambda n: n, lambda n: n[:2] + "*", lambda n: f"/^{n}$/", lambda n: "*" + n[-1], lambda n: n + "?"]
    for _ in range(300):
        acc = [SimpleNamespace(pattern=rng.choice(shapes)(rng.choice(names)), id=i) for i in range(rng.randint(0, 25))]
        index = AcceptanceIndex(acc)
        for _ in range(10):
            finding = (rng.choice(names), rng.choice(names))
            want = next((a for a in acc if any(name_matches(a.pattern, n) for n in finding)), None)
            assert index.first(finding) is want, (finding, [a.pattern for a in acc])


def test_commits_in_range_is_what_is_ancestor_says(tmp_path):
    from kbase.gitrepo import commits_in_range, open_repo

    git(tmp_path, "init", "-q", "-b", "main")
    line = [commit(tmp_path, str(i), f"m{i}") for i in range(6)]
    git(tmp_path, "checkout", "-q", "-b", "side", line[2])
    side = [commit(tmp_path, f"s{i}", f"s{i}") for i in range(3)]
    repo = open_repo(tmp_path)
    everything = set(line + side) | {"ab" * 20}
    for before, after in ((line[1], line[4]), (None, line[5]), (line[2], side[2]), (side[1], line[5])):
        want = {c for c in everything - {"ab" * 20}
                if repo.is_ancestor(c, after) and (before is None or not repo.is_ancestor(c, before))}
        assert commits_in_range(repo, after, before, everything) == want
    assert commits_in_range(repo, line[5], "cd" * 20, {line[0]}) is None  # a commit git does not hold
