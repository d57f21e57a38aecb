"""The report's leaderboard says what ``kbase show`` says of the same baseline: the four reads first, the
diagnosis and every ⚠'s prescription, computed by the one function (``analysis.diagnosis.annotate``)."""

from __future__ import annotations

import json
import re

import pytest

from helpers.cli import run_kbase


@pytest.fixture(scope="module")
def history_with_fallback(tmp_path_factory):
    """Two commits of the generated H100 mix plus an fp32 SGEMM (⚠), a jittery reduction and a pile of tiny adds."""
    import kbase
    from kbase.synth.history import HistorySpec, generate_history
    from kbase.synth.names import KernelSpec

    extra = [KernelSpec("ampere_sgemm_128x64_nn", "ampere_sgemm_128x64_nn", 900_000, 24),
             KernelSpec("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
                        "float, float, float>, unsigned int, float, 4> >(at::native::ReduceOp<float, "
                        "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4>)", "reduce_kernel",
                        250_000, 60, jitter=2.5),
             KernelSpec("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
                        "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul>)",
                        "vectorized_elementwise_kernel", 6_000, 2000)]
    root = tmp_path_factory.mktemp("lbreport")
    history = generate_history(root / "h", HistorySpec(commits=2, steps=[], extra_kernels=extra))
    settings = kbase.Settings.load(db=history.db_url, repo=history.repo)
    yield history, kbase.report_data(settings, before=0, after=1)


def test_report_rows_say_what_kbase_show_says(history_with_fallback):
    history, data = history_with_fallback
    view = data.leaderboard
    res = run_kbase("show", f"@{view.baseline_id}", "--format", "json", "--limit", "0", "--db", history.db_url)
    assert res.rc == 0, str(res)
    shown = {k["name"]: k for k in json.loads(res.stdout)["kernels"]}
    assert len(shown) == len(view.rows)
    for r in view.rows:
        k = shown[r.name]
        assert (r.tc_reason, r.diagnosis, r.diagnosis_reason) == (k["tc_reason"], k["diagnosis"], k["diagnosis_reason"])
        assert (r.count, r.total_ns, r.min_ns, r.max_ns) == (k["count"], k["total_ns"], k["min_ns"], k["max_ns"])
    kinds = {r.diagnosis for r in view.rows}
    assert {"expected", "not_expected", "unhealthy"} <= kinds
    sgemm = next(r for r in view.rows if r.name == "ampere_sgemm_128x64_nn")
    assert sgemm.tc == "fallback" and "fix on Hopper" in sgemm.tc_reason and "bf16 autocast" in sgemm.tc_reason


def test_report_leaderboard_page_order_and_prescription(history_with_fallback):
    from kbase.render.report.pages import leaderboard_page

    _, data = history_with_fallback
    html, _ = leaderboard_page(data.leaderboard)
    head = re.search(r"<h2>Leaderboard</h2><div class='table-wrap'><table><thead><tr>(.*?)</tr>", html).group(1)
    cells = re.findall(r"<th>(.*?)</th>", head)
    assert cells[:10] == ["#", "kernel", "TC", "Count", "Total", "Avg", "Min–Max", "%kernel", "Diagnosis", "%window"]
    rank = next(i for i, r in enumerate(data.leaderboard.rows, 1) if r.tc == "fallback")
    assert re.search(rf"<li>⚠ [^<]*#{rank}\b[^<]*fix on Hopper", html)  # the ⚠ row's prescription, by rank
    assert "Diagnosis of kernels &gt;= 5% of kernel time" in html
    assert re.search(r"class='diag-expected'[^>]*>expected<", html)
