"""Multi-rank Kineto profiles built from traces of ONE run (what the reader now requires).

These take over what ``test_read_kineto.py::test_multi_rank_directory``,
``::test_synthetic_multi_rank_file_order`` and
``test_kineto_pipeline.py::test_multi_rank_directory_is_one_profile_with_a_gpu_per_rank`` checked
with traces of different runs (world sizes 2 and 16; one trace twice), which issue 12 refuses:
ranks by distributedInfo or file order, one GPU row per rank, thread and process keys kept apart
by the rank's slot, each rank's attribution the same as its file read alone.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

from kbase.analysis.window import WindowSpec, select_window
from kbase.readers.kineto import read_kineto

from helpers.cli import run_kbase
from helpers.kineto_traces import trace_doc, write_trace
from helpers.shared import KINETO_DIR, shared_present

LOW48 = (1 << 48) - 1


def attribute(profile) -> dict[tuple[int, str], tuple[int, int]]:
    """(gpu, step) -> (kernels, ns), through the launch call, with pandas (as a consumer would)."""
    k = profile.kernels
    launched = k[k["launch_tid"] >= 0].sort_values("launch_start")
    steps = profile.ranges[profile.ranges["name"].str.fullmatch(r"ProfilerStep#\d+")].sort_values("start")
    steps = steps.rename(columns={"start": "s_start", "end": "s_end", "name": "step"})
    m = pd.merge_asof(launched, steps[["s_start", "s_end", "tid", "step"]], left_on="launch_start",
                      right_on="s_start", left_by="launch_tid", right_by="tid", direction="backward")
    m = m[m["step"].notna() & (m["launch_start"] < m["s_end"])]
    g = m.assign(dur=m["end"] - m["start"]).groupby(["gpu", "step"])["dur"].agg(["size", "sum"])
    return {key: (int(r["size"]), int(r["sum"])) for key, r in g.iterrows()}


def check_ranks_apart(prof, singles: dict[int, object]) -> None:
    """Each rank's GPU holds exactly its file's kernels and attribution; no key is shared."""
    k = prof.kernels
    by_rank = {r["rank"]: r for r in prof.extra["ranks"]}
    assert sorted(by_rank) == sorted(singles)
    per_gpu = attribute(prof)
    seen_threads: set[int] = set()
    for rank, single in singles.items():
        slot, (gpu,) = by_rank[rank]["slot"], by_rank[rank]["gpus"]
        mine = k[k["gpu"] == gpu]
        assert sorted(mine["start"]) == sorted(single.kernels["start"])
        tids = set(mine.loc[mine["launch_tid"] >= 0, "launch_tid"])
        assert {t >> 48 for t in tids} == {slot}
        ref = set(single.kernels.loc[single.kernels["launch_tid"] >= 0, "launch_tid"])
        assert {t & LOW48 for t in tids} == {t & LOW48 for t in ref}
        assert not tids & seen_threads
        seen_threads |= tids
        alone = {step: v for (_, step), v in attribute(single).items()}
        assert {step: v for (g, step), v in per_gpu.items() if g == gpu} == alone
    r = prof.ranges
    assert ((r["tid"].to_numpy() >> 24) == r["pid"].to_numpy()).all()


def test_synthetic_run_by_declared_rank(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    # file order differs from rank order: ranks come from distributedInfo
    write_trace(run / "a.json", trace_doc(2, 3))
    write_trace(run / "b.json.gz", trace_doc(0, 3))
    write_trace(run / "c.json", trace_doc(1, 3))
    prof = read_kineto(run)
    assert [(r["rank"], Path(r["file"]).name) for r in prof.extra["ranks"]] == [(0, "b.json.gz"), (1, "c.json"), (2, "a.json")]
    assert prof.gpus["gpu"].tolist() == [0, 1, 2] and prof.gpus["pid"].tolist() == [4000, (1 << 24) | 4000, (2 << 24) | 4000]
    singles = {r: read_kineto(run / n) for r, n in ((0, "b.json.gz"), (1, "c.json"), (2, "a.json"))}
    check_ranks_apart(prof, singles)
    assert sorted(prof.extra["step_wall_ns_by_rank"]) == [0, 1, 2]
    assert prof.extra["absent_ranks"] == [] and not prof.extra.get("notes")
    w = select_window(prof, WindowSpec())
    assert w.n_gpus == 3 and not w.missing_gpus


def test_synthetic_run_without_distributed_info_ranks_by_file_order(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    for r in range(2):
        write_trace(run / f"worker{r}.json", trace_doc(r, None))
    prof = read_kineto(run)
    assert [(r["rank"], Path(r["file"]).name) for r in prof.extra["ranks"]] == [(0, "worker0.json"), (1, "worker1.json")]
    check_ranks_apart(prof, {r: read_kineto(run / f"worker{r}.json") for r in range(2)})
    # a list of files is the same profile
    listed = read_kineto([run / "worker0.json", run / "worker1.json"])
    pd.testing.assert_frame_equal(listed.kernels, prof.kernels)


@pytest.fixture
def real_two_ranks(tmp_path) -> Path:
    """A100 rank 0 of 16, and the same capture relabelled rank 1: two ranks of one run."""
    src = KINETO_DIR / "a100_rank0_of16.json.gz"
    if not shared_present() or not src.is_file():
        pytest.skip("../shared/data/kineto not present: real-trace case skipped")
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank0.json.gz").write_bytes(src.read_bytes())
    doc = json.loads(gzip.decompress(src.read_bytes()))
    doc["distributedInfo"]["rank"] = 1
    write_trace(run / "rank1.json.gz", doc)
    return run


@pytest.mark.slow
def test_real_run_of_two_ranks(real_two_ranks):
    run = real_two_ranks
    prof = read_kineto(run)
    assert prof.n_gpus == 2 and set(prof.gpus["model"]) == {"NVIDIA A100-SXM4-80GB"}
    check_ranks_apart(prof, {0: read_kineto(run / "rank0.json.gz"), 1: read_kineto(run / "rank1.json.gz")})
    assert prof.extra["absent_ranks"] == list(range(2, 16))
    assert any("ranks 2-15 of a world of 16 have no trace" in n for n in prof.extra["notes"])


@pytest.mark.slow
def test_real_run_through_the_cli_has_a_gpu_per_rank(real_two_ranks):
    res = run_kbase("top", real_two_ranks, "--format", "json", "--limit", "0", "--per-gpu")
    assert res.rc == 0, res
    doc = json.loads(res.stdout)
    assert doc["summary"]["gpus"] == 2
    per_gpu = defaultdict(int)
    for k in doc["kernels"]:
        per_gpu[k["gpu"]] += k["count"]
    one = json.loads(run_kbase("top", real_two_ranks / "rank0.json.gz", "--format", "json", "--limit", "0").stdout)
    assert sorted(per_gpu.values()) == [one["summary"]["launches"]] * 2
    assert any("ranks 2-15" in n for n in doc["notes"])
