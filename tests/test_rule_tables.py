"""Documented rules, one table per family, each row a case written from the docs (not read off the code):
prune's keep rules (docs/cli.md "kbase prune", docs/export-format.md), the tensor-core rules per architecture and
data type (docs/kernel-classification.md), the export content digest's fields (docs/export-format.md), and
windowing with warm-up (docs/leaderboard.md). ``benchmarks/mutants.py`` plants a mutation per rule and checks
that these tables (with the tests beside them) catch each."""

from __future__ import annotations

import json

import pytest

from helpers.cli import run_kbase

# ------------------------------------------------------------------------------------------ prune keep rules

# "Never deletes one in a --keep-branch's history, stored on such a branch, needed by an acceptance (its commit and
# the base before it)". The world: main's history m1 <- m2 (kept branch ``main``); an accepted commit a2 on a
# branch whose first parent is a1, itself after m1; f1 on a feature branch.
HISTORY = {"m1", "m2"}
KEEP_ROWS = [
    # (workload, commit, branch stored on, kept?, why contains)
    ("train", "m1", "feature", True, "in the history of main"),
    ("train", "m2", "", True, "in the history of main"),
    ("train", "x9", "main", True, "stored on main"),  # a commit since rewritten away, stored on main
    ("train", "x8", "origin/main", True, "stored on origin/main"),  # the remote-tracking name is the branch
    ("train", "a2", "pr-7", True, "acceptance #1 is at its commit"),
    ("train", "a1", "pr-7", True, "the base of acceptance #1"),
    ("train", "a0", "pr-7", False, ""),  # older than the base: nobody's
    ("other", "a2", "pr-7", False, ""),  # the acceptance is of another workload
    ("train", "f1", "feature", False, ""),
    ("train", "f2", "", False, ""),
]


def _rules():
    from kbase.api.keep_rules import Accepted, KeepRules

    rules = KeepRules({"main": ["m2"]}, set(HISTORY))
    stored = [(w, c) for w, c, *_ in KEEP_ROWS]

    class Repo:  # first_parents' view of the accepted line: a2 <- a1 <- a0
        pass

    import kbase.gitrepo as gitrepo

    real = gitrepo.first_parents
    gitrepo.first_parents = lambda repo, start: {"a2": ["a2", "a1", "a0"]}.get(start, [start])
    try:
        rules.need([Accepted("train", "a2", "acceptance #1")], stored, Repo())
    finally:
        gitrepo.first_parents = real
    return rules


@pytest.mark.parametrize("row", KEEP_ROWS, ids=lambda r: f"{r[0]}-{r[1]}-{r[2] or 'nobranch'}")
def test_prune_keep_rules(row):
    workload, commit, branch, kept, why = row
    got = _rules().why_kept(workload, commit, branch)
    assert (got is not None) == kept, got
    if kept:
        assert why in got


# ------------------------------------------------------------------------------------------ tensor-core rules

# docs/kernel-classification.md: ✓ tensor cores (tc), ⚠ eligible without a tensor-core path (fallback), - not
# eligible (na); per architecture and data type.
TC_ROWS = [
    ("volta", "fp16 on the CUDA cores", "volta_fp16_sgemm_fp16_128x64_nn", "fallback"),
    ("volta", "hgemm", "volta_hgemm_128x128_nn", "fallback"),
    ("volta", "fp32 SGEMM", "volta_sgemm_128x64_nn", "fallback"),
    ("turing", "fp16 MMA 1688", "turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn", "tc"),
    ("ampere", "fp16 MMA 16816", "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", "tc"),
    ("ampere", "fp32 SGEMM", "ampere_sgemm_128x64_tn", "fallback"),
    ("ampere", "bf16 xmma", "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_"
                            "tensor16x8x16_kernel", "tc"),
    ("hopper", "tf32 xmma", "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32_warpgroupsize1x1x1_"
                            "execute_segment_k_off_kernel__5x_cublas", "tc"),
    ("hopper", "cuBLASLt nvjet (bf16/fp16)", "nvjet_hsh_256x128_64x4_1x2_h_bz_coopA_NTT", "tc"),
    ("any", "fp32 convolution", "implicit_convolve_sgemm", "fallback"),
    ("any", "gemv", "gemv2T_kernel_val<int, int, float, float, float, 128, 16, 4, 4, false, false>", "na"),
    ("any", "elementwise", "void at::native::vectorized_elementwise_kernel<4, float>", "na"),
]


@pytest.mark.parametrize("row", TC_ROWS, ids=lambda r: f"{r[0]}-{r[1]}")
def test_tensor_core_rules(row):
    from kbase.analysis.classify import tensor_core_state

    _arch, _dtype, name, want = row
    assert tensor_core_state(name)[0].value == want


# ------------------------------------------------------------------------------------------ the export digest

# docs/export-format.md: ``content`` is the sha256 of what was measured: the baseline's measurement columns, not
# the bookkeeping ones listed there; its kernels' names in row order; its op keys; every blob column's values.
DOCUMENTED_BOOKKEEPING = {"created_at", "branch", "detached", "dirty", "host", "tags", "note", "kbase_version",
                          "source_name", "source_mtime_ns", "source_probe", "kind",
                          "step_ns", "idle_ns",  # (these two repeat the budget in summary_json, which is covered)
                          "capture_span"}  # (and this the capture's span in summary_json)


def _row() -> dict:
    from kbase.store.export_folder import baseline_columns

    values = {"created_at": "2026-01-01T00:00:00+00:00", "commit_date": "2026-01-01T00:00:00+00:00"}
    return {c: values.get(c, 1) for c in baseline_columns()}


def _changed(value):
    if isinstance(value, str):
        return "2026-01-02T00:00:00+00:00" if value.startswith("2026") else value + "x"
    return value + 1


def _digest(row=None, names=None, ops=None, blob=b"levels-values") -> str:
    from kbase.store.export_files import BLOBS, content_digest

    plains = {b: (blob if b == "levels" else None) for b in BLOBS}
    return content_digest(row or _row(), names or ["gemm", "relu"], plains, ops or [["Linear/aten::mm", "aten::mm"]])


@pytest.mark.parametrize("column", sorted(_row()))
def test_the_digest_covers_every_measurement_column_and_no_bookkeeping(column):
    row = _row()
    row[column] = _changed(row[column])
    assert (_digest(row) == _digest()) == (column in DOCUMENTED_BOOKKEEPING), column


@pytest.mark.parametrize("part", ["names", "name order", "ops", "blob values"])
def test_the_digest_covers_names_ops_and_values(part):
    changed = {"names": lambda: _digest(names=["gemm", "relu2"]), "name order": lambda: _digest(names=["relu", "gemm"]),
               "ops": lambda: _digest(ops=[["Linear/aten::addmm", "aten::addmm"]]),
               "blob values": lambda: _digest(blob=b"levels-values2")}[part]()
    assert changed != _digest()


# ------------------------------------------------------------------------------------------ windowing and warm-up

# docs/leaderboard.md: "Default: all complete iterations after one warm-up iteration (when at least three exist)";
# ``--warmup N`` skips N; an N that leaves nothing is refused.
WARMUP_ROWS = [
    # (iterations in the trace, --warmup or None, iterations used or None for refused, skipped)
    (1, None, 1, 0), (2, None, 2, 0), (3, None, 2, 1), (5, None, 4, 1),
    (5, 0, 5, 0), (5, 2, 3, 2), (5, 4, 1, 4), (5, 5, None, None), (3, 3, None, None),
]


@pytest.mark.parametrize("row", WARMUP_ROWS, ids=lambda r: f"{r[0]}it-warmup{r[1]}")
def test_windowing_and_warmup(row, tmp_path):
    from helpers.kineto_traces import make_trace

    steps, warmup, used, skipped = row
    trace = make_trace(tmp_path / "t.json", rank=0, world=1, steps=steps)
    r = run_kbase("top", trace, "--format", "json", *(["--warmup", str(warmup)] if warmup is not None else []))
    if used is None:
        assert r.rc == 2 and "warmup" in r.stderr, r
        return
    assert r.rc == 0, r
    summary = json.loads(r.stdout)["summary"]
    assert (summary["iterations"], summary["warmup_skipped"]) == (used, skipped)
    assert summary["iteration_keys"] == list(range(skipped + 1, steps + 1))
