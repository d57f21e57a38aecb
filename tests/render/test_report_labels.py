"""Labels that never collide (issue 38, point 7): distinct kernels never share a label — a ``#id`` where short
names collide or where two cut labels would read alike, brackets balanced wherever a name is cut — in the
report, the notebook and the command line's steps table; commit ticks spaced for the chart's width. The
browser check of the same at 390 px is in ``test_report_labels_browser.py``."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from kbase.analysis.names import short_name
from kbase.display import clip_balanced
from kbase.render.report.labels import NARROW_PLOT_PX, TICK_PX, WIDE_PLOT_PX, commit_ticks, distinct_labels

CORPUS = Path(__file__).resolve().parents[1] / "data" / "kernel_names.jsonl"
PAIRS = {"<": ">", "(": ")", "[": "]", "{": "}"}


def balanced(text: str) -> bool:
    stack: list[str] = []
    for ch in text:
        if ch in PAIRS:
            stack.append(PAIRS[ch])
        elif ch in PAIRS.values():
            if not stack or stack.pop() != ch:
                return False
    return not stack


def _corpus() -> list[tuple[str, str]]:
    names = [json.loads(line)["name"] for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [(n, short_name(n)) for n in dict.fromkeys(names)]


@pytest.mark.parametrize("limit", [22, 40, 48, 80])
def test_real_kernel_names_get_distinct_balanced_labels(limit):
    """733 real names (97 elementwise kernels among them): every label distinct at every width, brackets
    balanced where the name itself is, the #id kept where short names collide."""
    kernels = _corpus()
    labels = distinct_labels(kernels, limit)
    assert len(set(labels.values())) == len(labels) == len(kernels)
    shared: dict[str, int] = {}
    for _, short in kernels:
        shared[short.casefold()] = shared.get(short.casefold(), 0) + 1
    for name, short in kernels:
        label = labels[name]
        assert len(label) <= limit, label
        if balanced(short):
            assert balanced(label), (short, label)
        if shared[short.casefold()] > 1:
            assert re.search(r" #[0-9a-f]{6}$", label), label


def test_the_bug_report_labels_are_told_apart():
    """The report's old label ``elementwise_kernel [int)2, void at::nativ…]``, one for four kernels."""
    tail = "void at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, {}>>(int)"
    names = [f"void at::native::elementwise_kernel<(int)128, (int)2, {tail.format(op)}>(int, {op})"
             for op in ("AddFunctor", "MulFunctor", "DivFunctor", "SubFunctor")]
    labels = distinct_labels([(n, "elementwise_kernel") for n in names], 48)
    assert len(set(labels.values())) == 4
    assert all(balanced(v) and re.search(r" #[0-9a-f]{6}$", v) for v in labels.values()), labels


def test_clip_balanced_closes_what_it_cuts_and_keeps_the_id():
    assert clip_balanced("vectorized_elementwise_kernel<4, FillFunctor<float>> #a1b2c3", 48) == \
        "vectorized_elementwise_kernel<4, FillF…> #a1b2c3"
    assert clip_balanced("vectorized_elementwise_kernel<4, FillFunctor<float>> #a1b2c3", 40) == \
        "vectorized_elementwise_kernel<…> #a1b2c3"
    assert clip_balanced("f(a, b)", 10) == "f(a, b)"
    assert clip_balanced("kernel<(int)128, (int)2>", 12) == "kernel<(i…)>"
    for width in range(4, 60):
        out = clip_balanced("ns::k<A<B<(int)1>>, C[2]>(x, y) #abcdef", width)
        assert len(out) <= width and balanced(out.split(" #")[0]), (width, out)


@pytest.mark.parametrize("plot_px,count,inset", [(NARROW_PLOT_PX, 3, True), (WIDE_PLOT_PX, 8, False)])
def test_commit_ticks_keep_their_room(plot_px, count, inset):
    """Every pair of ticks at least ``TICK_PX`` apart on a plot ``plot_px`` wide, whatever the history's length
    (five commits on a phone was 75 px a commit: three ticks collided); at least one tick."""
    from kbase.render.report.model import CommitPoint, CommitRef

    for n in range(1, 240):
        commits = [CommitPoint(ref=CommitRef(commit=f"{i:040x}", date="2026-01-01"), gpus=1, units=1,
                               unit="iteration", kernel_ns=1, compute_ns=1, communication_ns=0, memory_ns=0, wall_ns=1)
                   for i in range(n)]
        ticks = commit_ticks(commits, list(range(n)), count, inset=inset, plot_px=plot_px)
        vals = ticks["tickvals"]
        assert 1 <= len(vals) <= count
        per_commit = plot_px / n
        assert all((b - a) * per_commit >= TICK_PX or math.isclose((b - a) * per_commit, TICK_PX)
                   for a, b in zip(vals, vals[1:])), (n, vals)


def test_notebook_and_steps_table_show_the_id_where_names_collide(tmp_path):
    """The notebook's leaderboard shows what ``kbase top`` shows: ``#id`` where short names collide."""
    import kbase
    from kbase.comparison.changepoints import KernelStep
    from kbase.render.steps import table_cells
    from kbase.synth.generate import ExportSpec, generate_export

    export = tmp_path / "g.sqlite"
    generate_export(export, ExportSpec(n_gpus=1, iterations=4, seed=5))
    lb = kbase.top(export, kbase.Settings.load(repo=tmp_path))
    shorts = [r["short_name"] for r in lb.records()]
    twice = next(s for s in shorts if shorts.count(s) > 1)
    page = lb._repr_html_()
    ids = re.findall(re.escape(twice) + r"[^<]* (#[0-9a-f]{6})</td>", page)
    assert len(ids) >= 2 and len(set(ids)) == len(ids), page[:2000]
    names = [r["name"] for r in lb.records() if r["short_name"] == twice][:2]
    steps = [KernelStep(name=n, short_name=twice, kind="step", from_commit="a" * 40, to_commit="b" * 40,
                        first_commit="b" * 40, before_ns=1.0, after_ns=2.0, rel=1.0, effect=0.1, steps=1, z=9.0)
             for n in names]
    cells = table_cells(steps, {})
    assert cells[0]["kernel"] != cells[1]["kernel"] and all(" #" in c["kernel"] for c in cells)
