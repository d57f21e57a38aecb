"""Issue #6, kernel names: quotes, backslashes, newlines, tabs, non-ASCII, SQL and format
metacharacters and an 8 KB template name must round-trip exactly — ``kbase top --format json``,
``kbase snapshot`` → ``kbase show --format json``, ``kbase diff --format json`` and
``kbase history`` — on SQLite and PostgreSQL, and every renderer (rich table, Markdown, CSV) must
cope with them.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from kbase.store import open_store as store_open
from kbase.synth.generate import ExportSpec, KernelSpec, generate_export

from helpers.cli import kb
from helpers.library import snap

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

FULL_HASH = "89abcdef0123456789abcdef0123456789abcdef"


def _long_name(size: int = 8192) -> str:
    head = "void cutlass::Kernel2<cutlass::gemm::kernel::GemmUniversal<cute::tuple<"
    parts, n = [], 0
    while len(head) + sum(len(p) + 2 for p in parts) < size - 40:
        parts.append(f"cute::C<{n}>")
        n += 1
    name = head + ", ".join(parts) + ">>>(T1::Params)"
    return name + "x" * (size - len(name))


WEIRD = [
    # (demangled name, short name)
    ('void quoted_kernel<"double" \'single\'>(char const*, char)', 'quoted_kernel<"q">'),
    ("void ns\\path::back\\slash_kernel<\\n, \\\\>(float*)", "back\\slash_kernel"),
    ("kernel_with_newline\nsecond line (float*)", "kernel_with_newline\nsecond"),
    ("tab\tand\rcarriage_return_kernel(int)", "tab\tkernel"),
    ("void ядро_ü<核, 🚀, (int)4>(float const*, c10::BFloat16)", "ядро_ü"),
    ("x'); DROP TABLE baseline; -- %s %(name)s {0} ${HOME} ?? :param", "sql_ish"),
    (_long_name(), "Kernel2"),
]
NAMES = [n for n, _ in WEIRD]


def _spec(seed: int) -> ExportSpec:
    kernels = [KernelSpec(name, short, 60_000 + 7_000 * i, 3) for i, (name, short) in enumerate(WEIRD)]
    kernels.append(KernelSpec("plain_gemm_kernel(float*)", "plain_gemm_kernel", 400_000, 4))
    return ExportSpec(n_gpus=1, iterations=6, kernels=kernels, seed=seed, nested_ranges=False)


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("names")
    out = {}
    for key, seed in (("a", 0), ("b", 1)):
        truth = generate_export(d / f"{key}.sqlite", _spec(seed))
        assert set(NAMES) <= set(truth.names)
        out[key] = truth.path
    return out


def _names(doc: dict, key: str = "name") -> list[str]:
    return [k[key] for k in doc["kernels"]]


def _assert_all_weird(names: list[str]) -> None:
    got = set(names)
    for n in NAMES:
        assert n in got, f"name lost or altered: {n[:80]!r}"
        # byte for byte, not merely equal after some normalisation
        assert [g.encode("utf-8") for g in names if g == n] == [n.encode("utf-8")]
    long = [g for g in names if len(g) >= 8000]
    assert long == [NAMES[-1]] and len(long[0]) == 8192


def test_top_json_round_trip(exports):
    res = kb("top", exports["a"], "--format", "json", "--limit", "0")
    assert res.rc == 0, res
    _assert_all_weird(_names(json.loads(res.stdout)))


@pytest.mark.parametrize("fmt", ["table", "md", "csv"])
def test_top_renders_weird_names(exports, fmt):
    res = kb("top", exports["a"], "--format", fmt, "--limit", "0")
    assert res.rc == 0, res
    assert res.stdout and "Traceback" not in res.stderr
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(res.stdout)))
        assert {r["name"] for r in rows} >= set(NAMES)


@pytest.mark.slow
def test_store_show_diff_history_round_trip(exports, store_url):
    db = ("--db", store_url, "--no-git", "--rev", FULL_HASH, "--name", "weird")
    ids = []
    for key in ("a", "b"):
        r = kb("snapshot", exports[key], *db, "--format", "json", "--limit", "0")
        assert r.rc == 0, r
        doc = json.loads(r.stdout)
        assert doc["created"]
        _assert_all_weird(_names(doc))
        ids.append(doc["baseline_id"])
    a, b = ids

    # show: what was stored comes back exactly
    r = kb("show", f"@{a}", "--db", store_url, "--format", "json", "--limit", "0")
    assert r.rc == 0, r
    shown = json.loads(r.stdout)
    _assert_all_weird(_names(shown))
    top = json.loads(kb("top", exports["a"], "--format", "json", "--limit", "0").stdout)
    assert _names(shown) == _names(top)

    # diff of two baselines and of two profile files
    for before, after in ((f"@{a}", f"@{b}"), (str(exports["a"]), str(exports["b"]))):
        r = kb("diff", before, after, "--db", store_url, "--format", "json", "--all")
        assert r.rc == 0, r
        doc = json.loads(r.stdout)
        _assert_all_weird(_names(doc))
        for k in doc["kernels"]:
            if k["name"] in NAMES:
                assert k["match"] == "name" and k["name_before"] == k["name"], k["name"][:80]
                assert k["class"] in ("unchanged", "within_noise", "improved", "regressed"), k["class"]

    # the gate of a baseline with itself is refused (issue 12: exit 2, one line, nothing on stdout)
    r = kb("gate", f"@{a}", f"@{a}", "--db", store_url, "--format", "json")
    assert r.rc == 2 and "same baseline" in r.stderr and r.stdout == "", r

    # every renderer of show and diff copes
    for fmt in ("table", "md", "csv"):
        r = kb("show", f"@{a}", "--db", store_url, "--format", fmt, "--limit", "0")
        assert r.rc == 0 and r.stdout, r
        r = kb("diff", f"@{a}", f"@{b}", "--db", store_url, "--format", fmt, "--all")
        assert r.rc == 0 and r.stdout, r

    # history finds each weird name (looked up by its hash) in both baselines
    for name in NAMES:
        r = kb("history", name, "--db", store_url, "--format", "json")
        assert r.rc == 0, r
        assert sorted(row["id"] for row in json.loads(r.stdout)["baselines"]) == sorted(ids), name[:80]


def test_names_stored_once_each(exports, store_url):
    """The store keeps each weird name once, byte for byte (read back with plain SQL)."""
    from sqlalchemy import text


    for key in ("a", "b"):
        assert snap(exports[key], name="w", db=store_url, rev=FULL_HASH, no_git=True).created
    _st = store_open(store_url)
    engine, _ = _st.engine, _st.url
    try:
        with engine.connect() as conn:
            stored = [r[0] for r in conn.execute(text("SELECT name FROM kernel_name"))]
    finally:
        engine.dispose()
    assert len(stored) == len(set(stored))
    for n in NAMES:
        assert stored.count(n) == 1, n[:80]
