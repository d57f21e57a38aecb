"""Documented rules, one table per family, each row a case written from the docs (not read off the code):
prune's keep rules (docs/cli.md "kbase prune", docs/export-format.md), the tensor-core rules per architecture and
data type (docs/kernel-classification.md), the export content digest's fields (docs/export-format.md),
windowing with warm-up (docs/leaderboard.md), and the gate's policy (docs/diff.md, docs/noise-model.md,
docs/budget.md, docs/cli.md "kbase gate"). ``benchmarks/mutants.py`` plants a mutation per rule and checks that
these tables (with the tests beside them) catch each."""

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
    from kbase.store.transfer.export_folder import baseline_columns

    values = {"created_at": "2026-01-01T00:00:00+00:00", "commit_date": "2026-01-01T00:00:00+00:00"}
    return {c: values.get(c, 1) for c in baseline_columns()}


def _changed(value):
    if isinstance(value, str):
        return "2026-01-02T00:00:00+00:00" if value.startswith("2026") else value + "x"
    return value + 1


def _digest(row=None, names=None, ops=None, blob=(1, 2)) -> str:
    import numpy as np

    from kbase.store.codec.packing import pack
    from kbase.store.transfer.export_files import BLOBS, content_digest

    levels = pack(2, {"count": (np.array(blob, dtype=np.int64), {})})
    blobs = {b: (levels if b == "levels" else None) for b in BLOBS}
    return content_digest(row or _row(), names or ["gemm", "relu"], blobs, ops or [["Linear/aten::mm", "aten::mm"]])


@pytest.mark.parametrize("column", sorted(_row()))
def test_the_digest_covers_every_measurement_column_and_no_bookkeeping(column):
    row = _row()
    row[column] = _changed(row[column])
    assert (_digest(row) == _digest()) == (column in DOCUMENTED_BOOKKEEPING), column


@pytest.mark.parametrize("part", ["names", "name order", "ops", "blob values"])
def test_the_digest_covers_names_ops_and_values(part):
    changed = {"names": lambda: _digest(names=["gemm", "relu2"]), "name order": lambda: _digest(names=["relu", "gemm"]),
               "ops": lambda: _digest(ops=[["Linear/aten::addmm", "aten::addmm"]]),
               "blob values": lambda: _digest(blob=(1, 3))}[part]()
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


# ------------------------------------------------------------------------------------------ the gate's policy

# docs/diff.md, docs/noise-model.md ("The decision", "Practical significance", "Policy"), docs/budget.md ("The step
# in a diff and the gate"), docs/cli.md "kbase gate": exit 0 pass, 1 regression, 2 incomparable. A kernel fails
# when its change is significant and every floor holds (>= abs_floor_us 2 µs per iteration per GPU, >= share_floor
# 0.5% of the iteration, >= the optional max_increase_pct) and its effect on the iteration reaches min_effect_pct
# (0.5%); smaller significant ones are "regressed (below gate floor)", never failing. Per-kernel overrides apply
# to the kernels they match; ignored kernels are never gated. The total kernel time fails at total_increase_pct
# (3%). A new kernel above the share floor fails with new_kernel = "fail" (the default), warns with "warn"; under
# the floor it is not gated. A regressed step fails unless --no-step-gate (a warning then); a step change the
# noise cannot judge is a warning. A kernel nothing could measure (cannot judge, low confidence) is listed, and
# fails only with --fail-on-cannot-judge. --warn-only exits 0. GPU model or count differing, or a candidate with
# fewer than half the iterations: incomparable (exit 2) unless --allow-incomparable. A regression covered by an
# unexpired acceptance whose commit is in the compared range (pattern: glob or /regex/ on the full or short
# name) is accepted, not failing.
GEMM = ("ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn", "ampere_bf16_s16816gemm", 8_000_000)  # ~96%
TARGET = ("void kbase_rule_target_kernel<float>(float *, int)", "kbase_rule_target_kernel", 100_000)  # ~1.2%
SMALL = ("void kbase_rule_small_kernel<float>(float *, int)", "kbase_rule_small_kernel", 20_000)  # ~0.25%
NEW_BIG = ("void kbase_rule_new_big_kernel<float>(float *, int)", "kbase_rule_new_big_kernel", 100_000)
NEW_SMALL = ("void kbase_rule_new_small_kernel<float>(float *, int)", "kbase_rule_new_small_kernel", 20_000)
NOISE = ("void at::native::vectorized_elementwise_kernel<(int)4, FillFunctor<float>>(int, T2, T3)",
         "vectorized_elementwise_kernel", 200_000)
TOTAL, STEP = "(total kernel time per iteration)", "(step time per iteration)"


def _spec(k, jitter=0.0, launches=1):
    from kbase.synth.generate import KernelSpec

    return KernelSpec(k[0], k[1], k[2], launches, jitter=jitter)


def _mix():
    return [_spec(GEMM), _spec(TARGET), _spec(SMALL), _spec(NOISE, 0.01, 2)]


# export key -> ExportSpec knobs (one GPU, 8 iterations; the kernels under test exact, so only the rules decide)
GATE_EXPORTS = {
    "base": {"seed": 1}, "aa": {"seed": 2},
    "target+5%": {"seed": 1, "slowdown": {TARGET[0]: 1.05}},  # +5,000 ns: +5%, ~0.06% of the iteration
    "target+1999ns": {"seed": 1, "slowdown": {TARGET[0]: 1.01999}},
    "target+2000ns": {"seed": 1, "slowdown": {TARGET[0]: 1.02}},
    "small+25%": {"seed": 1, "slowdown": {SMALL[0]: 1.25}},  # +5,000 ns on a 0.25% kernel
    "gemm+2%": {"seed": 1, "slowdown": {GEMM[0]: 1.02}},  # ~+1.9% of the iteration
    "all+5%": {"seed": 1, "slowdown": {k[0]: 1.05 for k in (GEMM, TARGET, SMALL, NOISE)}},
    "new big": {"seed": 1, "new": NEW_BIG}, "new small": {"seed": 1, "new": NEW_SMALL},
    "host +200ms": {"seed": 2, "host_delay_ns": 200_000_000},  # kernels as before, the step ~25x longer
    "two GPUs": {"seed": 2, "n_gpus": 2}, "A100": {"seed": 2, "gpu_model": "NVIDIA A100-SXM4-80GB"},
    "3 iterations": {"seed": 2, "iterations": 3},  # 2 used (after warm-up) against 7
}

ACC = {"glob": ("*s16816gemm*", None, "c2"), "short": ("ampere_bf16_s16816gemm", None, "c2"),
       "regex": ("/s16816gemm_bf16_256/", None, "c2"), "expired": ("*s16816gemm*", "2026-01-01", "c2"),
       "other kernel": ("*flash_fwd*", None, "c2"), "out of range": ("*s16816gemm*", None, "c0")}

# (rule, row, after export, policy overrides, gate options, acceptance, exit code, failing names)
GATE_ROWS = [
    ("noise", "an A/A pair passes", "aa", {}, {}, None, 0, []),
    ("min_effect_pct", "+5% of a 1.2% kernel: below the floor", "target+5%", {}, {}, None, 0, []),
    ("min_effect_pct", "the same with the floor under its effect", "target+5%", {"min_effect_pct": 0.05}, {}, None, 1,
     [TARGET[0]]),
    ("min_effect_pct", "+2% of the main GEMM: ~1.9% of the iteration", "gemm+2%", {}, {}, None, 1, [GEMM[0]]),
    ("min_effect_pct", "the same under a 2.5% floor", "gemm+2%", {"min_effect_pct": 2.5}, {}, None, 0, []),
    ("abs_floor_us", "+1,999 ns: under 2 µs", "target+1999ns", {"min_effect_pct": 0}, {}, None, 0, []),
    ("abs_floor_us", "+2,000 ns: at 2 µs", "target+2000ns", {"min_effect_pct": 0}, {}, None, 1, [TARGET[0]]),
    ("abs_floor_us", "+2,000 ns under a 2.001 µs floor", "target+2000ns", {"min_effect_pct": 0, "abs_floor_us": 2.001},
     {}, None, 0, []),
    ("share_floor", "+25% of a 0.25% kernel", "small+25%", {"min_effect_pct": 0}, {}, None, 0, []),
    ("share_floor", "the same under a 0.05% floor", "small+25%", {"min_effect_pct": 0, "share_floor": 0.0005}, {}, None,
     1, [SMALL[0]]),
    ("max_increase_pct", "+5% under a 4.9% relative floor", "target+5%", {"min_effect_pct": 0, "max_increase_pct": 4.9},
     {}, None, 1, [TARGET[0]]),
    ("max_increase_pct", "+5% under a 5.1% relative floor", "target+5%", {"min_effect_pct": 0, "max_increase_pct": 5.1},
     {}, None, 0, []),
    ("kernels override", "a 10% floor for the kernel", "target+5%",
     {"min_effect_pct": 0, "toml": '[tool.kbase.gate.kernels."*rule_target*"]\nmax_increase_pct = 10.0\n'}, {}, None,
     0, []),
    ("kernels override", "an override for another kernel", "gemm+2%",
     {"toml": '[tool.kbase.gate.kernels."*rule_target*"]\nmax_increase_pct = 10.0\n'}, {}, None, 1, [GEMM[0]]),
    ("ignore", "a glob on the full name", "target+5%", {"min_effect_pct": 0, "ignore": ["*rule_target*"]}, {}, None, 0,
     []),
    ("ignore", "a /regex/ on the short name", "target+5%",
     {"min_effect_pct": 0, "ignore": ["/^kbase_rule_target_kernel$/"]}, {}, None, 0, []),
    ("ignore", "a pattern of another kernel", "target+5%", {"min_effect_pct": 0, "ignore": ["*rule_small*"]}, {}, None,
     1, [TARGET[0]]),
    ("total_increase_pct", "every kernel +5%, each under its 10% floor", "all+5%", {"max_increase_pct": 10.0}, {},
     None, 1, [TOTAL]),
    ("total_increase_pct", "the same under a 6% total", "all+5%", {"max_increase_pct": 10.0, "total_increase_pct": 6.0},
     {}, None, 0, []),
    ("new_kernel", "a new 1.2% kernel (fail)", "new big", {}, {}, None, 1, [NEW_BIG[0]]),
    ("new_kernel", "a new 1.2% kernel (warn)", "new big", {"new_kernel": "warn"}, {}, None, 0, []),
    ("new_kernel", "a new 0.25% kernel: under the share floor", "new small", {}, {}, None, 0, []),
    ("step_gate", "the step grew, kernels flat", "host +200ms", {}, {}, None, 1, [STEP]),
    ("step_gate", "the same with --no-step-gate", "host +200ms", {"step_gate": False}, {}, None, 0, []),
    ("step_gate", "the same when the noise cannot judge it", "host +200ms", {"step_run_noise": 20.0}, {}, None, 0, []),
    ("warn_only", "a failing pair with --warn-only", "gemm+2%", {}, {"warn_only": True}, None, 0, [GEMM[0]]),
    ("incomparable", "GPU count differs", "two GPUs", {}, {}, None, 2, []),
    ("incomparable", "GPU model differs", "A100", {}, {}, None, 2, []),
    ("incomparable", "GPU model differs, --allow-incomparable", "A100", {}, {"allow_incomparable": True}, None, 0, []),
    ("incomparable", "fewer than half the iterations", "3 iterations", {}, {}, None, 2, []),
    ("acceptance", "a glob on the full name", "gemm+2%", {}, {}, "glob", 0, []),
    ("acceptance", "the short name", "gemm+2%", {}, {}, "short", 0, []),
    ("acceptance", "a /regex/", "gemm+2%", {}, {}, "regex", 0, []),
    ("acceptance", "expired", "gemm+2%", {}, {}, "expired", 1, [GEMM[0]]),
    ("acceptance", "of another kernel", "gemm+2%", {}, {}, "other kernel", 1, [GEMM[0]]),
    ("acceptance", "its commit outside the compared range", "gemm+2%", {}, {}, "out of range", 1, [GEMM[0]]),
]


@pytest.fixture(scope="module")
def gate_exports(tmp_path_factory):
    from kbase.synth.fixed_work import FixedKernel, FixedWorkSpec, generate_fixed_work
    from kbase.synth.generate import ExportSpec, generate_export

    root = tmp_path_factory.mktemp("gate-rules")
    out = {}
    for key, knobs in GATE_EXPORTS.items():
        knobs = dict(knobs)
        new = knobs.pop("new", None)
        spec = ExportSpec(n_gpus=knobs.pop("n_gpus", 1), iterations=knobs.pop("iterations", 8), kernels=_mix(),
                          add=[_spec(new)] if new else [], **knobs)
        out[key] = str(generate_export(root / f"{len(out)}.sqlite", spec).path)
    # without iteration markers, one launch of a kernel: nothing can measure its noise (cannot judge)
    solo = FixedKernel("void dp_kernel<256>(int*, int const*, int)", "dp_kernel", 1, 40_000_000)
    helper = FixedKernel("void init_kernel(int*, int)", "init_kernel", 400, 20_000)
    for key, kw in (("solo", {"seed": 1}), ("solo+20%", {"seed": 2, "slowdown": {solo.name: 1.2}})):
        out[key] = str(generate_fixed_work(root / f"{key}.sqlite", FixedWorkSpec(kernels=[solo, helper], **kw)))
    return out, root


def _acceptance(key: str | None):
    from datetime import date
    from types import SimpleNamespace

    if key is None:
        return []
    pattern, expires, commit = ACC[key]
    return [SimpleNamespace(id=1, pattern=pattern, reason="known", commit=commit, author="dev",
                            expires=date.fromisoformat(expires) if expires else None)]


def _gate_row(gate_exports, before: str, after: str, policy: dict, options: dict, acceptance: str | None):
    import kbase
    from kbase.comparison.gate import active_acceptances, decide

    exports, root = gate_exports
    policy = dict(policy)
    repo = root / f"repo-{abs(hash(str(policy)))}"  # [tool.kbase.gate] of the row (``toml``), flags for the rest
    repo.mkdir(exist_ok=True)
    (repo / "pyproject.toml").write_text(policy.pop("toml", ""))
    settings = kbase.Settings.load(repo=repo, db=f"sqlite:///{root / 'unused.db'}", policy=policy)
    result = kbase.gate(exports[before], exports[after], settings, **options)
    if acceptance is None:
        return result.verdict
    # the range c0..c2 compared at 2026-06-01: c1 and c2 are inside it (docs/diff.md "Known regressions")
    accepted = active_acceptances(_acceptance(acceptance), today=__import__("datetime").date(2026, 6, 1),
                                  in_range=lambda commit: commit in ("c1", "c2"))
    return decide(result.comparison.result, accepted, **options)


@pytest.mark.parametrize("row", GATE_ROWS, ids=lambda r: f"{r[0]}-{r[1]}")
def test_gate_policy(row, gate_exports):
    _rule, _what, after, policy, options, acceptance, code, failing = row
    verdict = _gate_row(gate_exports, "base", after, policy, options, acceptance)
    assert verdict.code == code, (verdict.status, [f.name for f in verdict.failing], verdict.mismatches)
    assert [f.name for f in verdict.failing] == failing
    assert bool(verdict.accepted) == (code == 0 and acceptance is not None)


# a kernel nothing could measure: listed, failing only with --fail-on-cannot-judge (cannot_judge = "fail")
@pytest.mark.parametrize("cannot_judge,code", [("warn", 0), ("fail", 1)])
def test_gate_policy_cannot_judge(gate_exports, cannot_judge, code):
    verdict = _gate_row(gate_exports, "solo", "solo+20%", {"cannot_judge": cannot_judge}, {}, None)
    assert verdict.code == code
    assert [f.short_name for f in verdict.failing + verdict.warnings if f.kind == "cannot_judge"] == ["dp_kernel"]
