"""One unit per column, everywhere: every time column of every table (terminal, Markdown, the PR comment, the
HTML report; leaderboard, diff, totals, history, steps, list) states its cells in one unit chosen from the
column's magnitude (``units.column_unit``); a value that does not exist (a new kernel's "before") is ``–``, never
``0.000 ms`` in one row and ``0.00 µs`` in another; a category absent on both sides (no NCCL on one GPU) is left
out; notes write a change as ``-1.945 ms``, not ``-1945.0 µs``.

The diff is of two generated one-GPU exports without NCCL: the second adds a kernel and slows a GEMM by 30%.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from kbase.units import ABSENT, column_unit, fmt_signed_ns

from helpers.cli import run_kbase
from helpers.tables import column, md_table, units

NEW = "void brand_new_fused_kernel<float>(float const*, float*, int)"


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    from kbase.synth.generate import ExportSpec, generate_export
    from kbase.synth.names import KernelSpec, default_kernel_mix

    root = tmp_path_factory.mktemp("units")
    mix = [k for k in default_kernel_mix() if "nccl" not in k.name.lower()]
    gemm = next(k.name for k in mix if k.short_name.startswith("nvjet_hsh_256x128"))
    a = generate_export(root / "a.sqlite", ExportSpec(n_gpus=1, iterations=6, kernels=mix, seed=1)).path
    b = generate_export(root / "b.sqlite", ExportSpec(n_gpus=1, iterations=6, kernels=mix, seed=2,
                                                      add=[KernelSpec(NEW, "brand_new_fused_kernel", 61_000, 6)],
                                                      slowdown={gemm: 1.3})).path
    return a, b


def test_column_unit_is_chosen_by_the_columns_magnitude():
    u = column_unit([3e9, 40e6, 1.2e6, 50e3, 900])  # a leaderboard's totals: its median reads in ms
    assert [u(v) for v in (3e9, 50e3, 900, None)] == ["3000.000 ms", "0.050 ms", "0.001 ms", ABSENT]
    assert column_unit([12e6, 3e6]).unit == "ms" and column_unit([4e3, 9e3, 20e3]).unit == "µs"
    assert column_unit([2e9, 1e3, 2e3]).unit == "ms"  # µs would need seven digits before the point for 2 s
    wide = column_unit([30e9, 1e3, 2e3])
    assert (wide(30e9), wide(1e3)) == ("30.000 s", "<0.001 s")  # never more than four digits before the point
    assert column_unit([100.0, 250e3], signed=True)(100.0) == "+0.1 µs"  # one decimal: the median reads 250.0
    assert column_unit([-5.0, 250e6], signed=True)(-5.0) == "-<0.1 ms"
    assert column_unit([0.0, 0.0])(0.0) == "0 ns"
    assert fmt_signed_ns(-1_945_000) == "-1.945 ms" and fmt_signed_ns(1200) == "+1.20 µs"


def test_diff_markdown_one_unit_per_column_and_no_absent_category(exports):
    a, b = exports
    r = run_kbase("diff", a, b, "--format", "md", "--all")
    assert r.rc == 0, r
    assert "communication (NCCL)" not in r.stdout and "0 ns -> 0 ns" not in r.stdout  # no NCCL on one GPU
    head, rows = md_table(r.stdout, "class")
    times = column(head, rows, "before/iter") + column(head, rows, "after/iter")
    assert len(units(times)) == 1, times
    assert len(units(column(head, rows, "Δ/iter"))) == 1
    new = next(row for row in rows if "brand\\_new\\_fused\\_kernel" in row[head.index("kernel")])
    assert new[head.index("before/iter")] == ABSENT and new[head.index("class")] == "new"


def test_terminal_diff_and_gate_comment(exports, tmp_path):
    a, b = exports
    r = run_kbase("diff", a, b)
    assert r.rc == 0 and "communication (NCCL)" not in r.stdout, r
    assert "0.000 ms" not in r.stdout and "0.00 µs" not in r.stdout  # no zero stands for a kernel that was not there
    comment = tmp_path / "comment.md"
    r = run_kbase("gate", a, b, "--comment-md", comment)
    text = comment.read_text(encoding="utf-8")
    assert "| communication |" not in text
    head, rows = md_table(text, "per iteration per GPU")
    assert len(units(column(head, rows, "before") + column(head, rows, "after"))) == 1
    head, rows = md_table(text, "class")  # the full table of changed kernels
    assert len(units(column(head, rows, "before") + column(head, rows, "after"))) == 1
    assert len(units(column(head, rows, "Δ/iter"))) == 1
    assert any(row[head.index("before")] == ABSENT for row in rows)  # the new kernel


def test_leaderboard_markdown_one_unit_per_time_column(exports):
    a, _ = exports
    r = run_kbase("top", a, "--format", "md", "--no-store", "--limit", "0")
    assert r.rc == 0, r
    head, rows = md_table(r.stdout, "#")
    assert len(rows) > 15
    for name in ("Total", "Avg", "Min–Max", "/iter/GPU", "Med", "Std"):
        assert len(units(column(head, rows, name))) == 1, (name, column(head, rows, name))


def test_history_steps_and_list_tables():
    from kbase.comparison.changepoints import KernelStep
    from kbase.render.baselines import list_cells
    from kbase.render.history import table_cells as history_cells
    from kbase.render.steps import table_cells as steps_cells

    when = datetime(2026, 1, 5, tzinfo=UTC)
    rows = [{"id": i, "commit": f"{i:040x}", "created_at": when, "commit_date": when, "subject": "s", "workload": "w",
             "branch": "main", "count": 10, "avg_ns": avg, "per_iter_ns": per, "change_pct": None}
            for i, (avg, per) in enumerate([(900.0, 1.2e6), (1500.0, 2.4e6), (80e3, 30e6)], 1)]
    cells = history_cells(rows)
    assert len(units([c["avg"] for c in cells])) == 1 and len(units([c["per_iter"] for c in cells])) == 1
    steps = [KernelStep("k", "k", "step", "a" * 40, "b" * 40, "b" * 40, before, after, after / before - 1, 0.01, 1, 5.0)
             for before, after in ((900.0, 1200.0), (1.2e6, 1.5e6))]
    cells = steps_cells(steps, {})
    assert len(units([c["before"] for c in cells] + [c["after"] for c in cells])) == 1
    baselines = [SimpleNamespace(id=i, created_at=when, workload="w", commit=f"{i:040x}", dirty=False,
                                 commit_date=when, branch="main", gpu_count=1, gpu_models="H100", aligned=True,
                                 window_desc="w", iterations_used=1, total_kernel_ns=ns, tags="[]", kind="snapshot")
                 for i, ns in enumerate([900.0, 2.5e6, 70e6], 1)]
    assert len(units([c["kernel"] for c in list_cells(baselines, {})])) == 1


def test_report_tables_one_unit_per_column(exports, tmp_path):
    """The diff page of the report (the same pair, stored at two commits): totals and the kernel table."""
    from kbase.render.report.pages import diff_page

    a, b = exports
    r = run_kbase("diff", a, b, "--format", "json")
    doc = json.loads(r.stdout)
    body, _ = diff_page(doc)
    tables = re.findall(r"<table>(.*?)</table>", body, re.DOTALL)
    for html in tables:
        head = [re.sub("<.*?>", "", h) for h in re.findall(r"<th>(.*?)</th>", html)]
        rows = [re.findall(r"<td[^>]*>(.*?)</td>", tr) for tr in re.findall(r"<tr><td.*?</tr>", html)]
        for name in ("before", "after", "before/iter", "after/iter"):
            if name in head:
                assert len(units([re.sub("<.*?>", "", row[head.index(name)]) for row in rows])) == 1, name
    assert "communication (NCCL)" not in body and ABSENT in body  # no NCCL row; the new kernel's before
