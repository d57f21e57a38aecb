"""Tables that read (issue 38), from the user's side: what ``kbase diff`` and ``kbase gate`` print, piped.

- at 80 columns the class is a short word and the kernel name gets what is left (at least 30 characters);
- piped without ``COLUMNS`` the output is 100 columns wide, never the widest row;
- before, after and Δ of a table read in one unit (at most four digits before the point), never ``+3941.0 µs``
  beside ``4.606 ms``;
- no ``inf``, ``nan`` or false ``0.000`` for a new or gone kernel or a change over zero: ``–`` or ``new``;
- a diff where nothing changed prints a line saying so, not an empty table header;
- an error names a switch as it is typed (``--strict``, never ``--strict True``);
- an incomparable gate says INCOMPARABLE and why first, and prints no row it did not judge.

The real pair is committed (tests/data/kineto: ResNet-50, 0 and 4 DataLoader workers: new, gone and swapped
kernels); the others are generated (``kbase.synth``).
"""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from rich.cells import cell_len

from kbase.comparison.swaps import NOTE_LIMIT, op_swap_notes
from kbase.enums import KernelClass
from kbase.units import ABSENT

from helpers.cli import run_kbase
from helpers.gitrepos import commit, git
from helpers.shared import REPO
from helpers.tables import column, md_table, units

DATA = REPO / "tests" / "data" / "kineto"
A, B = (str(DATA / f"v100_resnet50_w{n}_jan2021.pt.trace.json.gz") for n in (0, 4))
RAW = re.compile(r"\b(inf|nan|infinity)\b|\+inf%|nan%", re.I)
FALSE_ZERO = re.compile(r"^[+-]?0\.0+ (s|ms|µs)$")


def _table(text: str) -> tuple[str, list[str]]:
    """The kernel table's header line and body lines (between its rule and the first line that is no row)."""
    lines = text.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("Kernel diff"))
    body = []
    for line in lines[title + 3:]:
        if not line.strip() or not re.match(r"^[a-z][a-z ()\[\].]*\s{2,}\S", line) or line.startswith("hidden at"):
            break
        body.append(line)
    return lines[title + 1], body


def test_at_80_columns_the_class_is_a_word_and_the_name_gets_30_characters(monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    r = run_kbase("diff", A, B)
    assert r.rc == 0, r
    assert all(cell_len(line) <= 80 for line in r.stdout.splitlines()), r.stdout
    head, body = _table(r.stdout)
    assert len(body) >= 10
    words = {KernelClass(c).label for c in KernelClass}
    assert all(len(w) <= 12 for w in words)  # every class word fits a narrow column
    cells = [re.split(r"\s{3,}", line.strip()) for line in body]
    assert {c[0] for c in cells} <= words, body
    names = [c[1] for c in cells]
    assert max(cell_len(n) for n in names) >= 30, names  # a cut name fills the column: the column is >= 30
    assert all(cell_len(n) >= 30 for n in names if "…" in n), names
    assert "(swap)" not in r.stdout  # the class says it; the name keeps its room
    assert head.split()[:2] == ["class", "kernel"]


def test_piped_without_columns_is_100_wide(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    r = run_kbase("diff", A, B)
    assert r.rc == 0, r
    widths = [cell_len(line) for line in r.stdout.splitlines()]
    assert max(widths) == 100, max(widths)  # the table takes the 100 columns, nothing is wider
    rule = next(line for line in r.stdout.splitlines() if set(line) == {"─"})
    assert cell_len(rule) == 100


def _digits_before_point(cell: str) -> int:
    m = re.match(r"^[+-]?<?(\d+)", cell.replace("\\", "").replace("&lt;", "<"))
    return len(m.group(1)) if m else 0


def test_before_after_and_delta_read_in_one_unit(monkeypatch):
    for args in ((A, B), (B, A), (A, B, "--all")):
        r = run_kbase("diff", *args, "--format", "md")
        assert r.rc == 0, r
        head, rows = md_table(r.stdout, "class")
        cells = [c for name in ("before/iter", "after/iter", "Δ/iter") for c in column(head, rows, name)]
        assert len(units(cells)) == 1, cells
        assert all(_digits_before_point(c) <= 4 for c in cells), cells
    monkeypatch.setenv("COLUMNS", "200")
    text = run_kbase("diff", A, B).stdout
    assert "µs" not in "".join(_table(text)[1]) and "-3.941 ms" in text  # not "-3941.0 µs" beside 4.606 ms
    budget = [line for line in text.splitlines() if re.match(r"^  (compute|idle|exposed \w+): ", line)]
    assert budget and all(len(set(re.findall(r"(ms|µs|ns)\b", line))) == 1 for line in budget), budget


def test_no_raw_numbers_for_new_and_gone_kernels(monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "200")
    outs = {"table": run_kbase("diff", A, B, "--all", "--wide"), "md": run_kbase("diff", A, B, "--all", "-f", "md"),
            "op": run_kbase("diff", A, B, "--by", "op", "--all", "--wide"),
            "op-md": run_kbase("diff", A, B, "--by", "op", "-f", "md"),
            "gate": run_kbase("gate", A, B, "--all", "--comment-md", tmp_path / "c.md", "--junit", tmp_path / "j.xml",
                              "--output", tmp_path / "g.json")}
    texts = {k: r.stdout for k, r in outs.items()} | {
        f.name: f.read_text(encoding="utf-8") for f in (tmp_path / "c.md", tmp_path / "j.xml", tmp_path / "g.json")}
    assert all(r.rc == 0 for r in outs.values()), outs
    for what, text in texts.items():
        assert not RAW.search(text), (what, RAW.search(text))
    head, rows = md_table(texts["md"], "class")
    new = [row for row in rows if row[head.index("Δ%")] == "new"]
    gone = [row for row in rows if row[head.index("Δ%")] == "-100.0%"]
    assert new and gone
    assert all(row[head.index("before/iter")] == ABSENT for row in new)
    assert all(row[head.index("after/iter")] == ABSENT for row in gone)
    for name in ("before/iter", "after/iter", "Δ/iter"):
        assert not [c for c in column(head, rows, name) if FALSE_ZERO.match(c)], name
    ops_head, ops_rows = md_table(texts["op-md"], "class")
    for name in ("before/iter", "after/iter"):
        assert not [c for c in column(ops_head, ops_rows, name) if FALSE_ZERO.match(c)], name
    assert ABSENT in column(ops_head, ops_rows, "before/iter")  # a kernel new to its op: no before, no zero
    doc = json.loads(texts["g.json"])
    assert all(k["delta_pct"] is None for k in doc["kernels"] if k["match"] == "new")


def test_a_swap_note_over_zero_and_without_mde_states_no_raw_number():
    """An op that ran nothing before (Δ% over zero) and whose MDE nothing measured: the note says ``new`` and
    leaves the MDE out, its verdict first, under the comment's cut however many kernels it lists."""
    names = [f"kernel_number_{i}_with_a_long_name_for_its_tile_shape" for i in range(30)]
    group = {"op": "aten::convolution", "kernels": names, "gated": False, "ignored": False,
             "class": "within_noise", "delta_pct": float("inf"), "effect": 0.004, "mde_rel": float("nan")}
    note, = op_swap_notes(SimpleNamespace(groups=[group]), {"name": _array(names), "short_name": _array(names)})
    assert not RAW.search(note) and "op time new" in note and "MDE" not in note
    assert note.startswith("algorithm swap in op aten::convolution: within noise, not gated (")
    assert len(note) <= NOTE_LIMIT and "more)" in note


def _array(values):
    import numpy as np

    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def test_nothing_changed_prints_a_line_not_an_empty_table(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    for args in ((), ("--by", "op")):
        r = run_kbase("diff", A, A, *args)
        assert r.rc == 0, r
        assert re.search(r"^no (kernel|op) changed beyond its noise\b", r.stdout, re.M), r.stdout
        assert "Kernel diff" not in r.stdout and "Diff by op" not in r.stdout
        assert not re.search(r"^class\s+(kernel|op)", r.stdout, re.M) and "───" not in r.stdout
    for args in ((), ("--by", "op")):
        md = run_kbase("diff", A, A, "-f", "md", *args).stdout
        assert "| class |" not in md and re.search(r"no (kernel|op) changed beyond its noise", md), md


@pytest.fixture(scope="module")
def exports(tmp_path_factory):
    from kbase.synth.generate import ExportSpec, default_kernel_mix, generate_export

    root = tmp_path_factory.mktemp("tables")
    mix = default_kernel_mix()
    a = generate_export(root / "a.sqlite", ExportSpec(n_gpus=1, iterations=6, kernels=mix, seed=1)).path
    b = generate_export(root / "b.sqlite", ExportSpec(n_gpus=1, iterations=6, kernels=mix, seed=2,
                                                      gpu_model="NVIDIA A100-SXM4-80GB",
                                                      slowdown={k.name: 1.6 for k in mix})).path
    return root, a, b


def test_an_incomparable_gate_says_so_first_and_prints_no_row(exports, monkeypatch):
    _, a, b = exports
    monkeypatch.setenv("COLUMNS", "120")
    r = run_kbase("gate", a, b)
    assert r.rc == 2, r
    lines = r.stdout.splitlines()
    assert lines[0] == "gate: INCOMPARABLE (exit 2)" and lines[1].startswith("  incomparable: GPU model differs")
    assert "Kernel diff" not in r.stdout and not re.search(r"^(regressed|new|gone)\s", r.stdout, re.M)
    assert "kernel rows not shown" in r.stdout and not re.search(r"^kernels: ", r.stdout, re.M)  # no class either
    quiet = run_kbase("gate", a, b, "-q").stdout
    assert quiet.startswith("gate: INCOMPARABLE (exit 2); incomparable: GPU model differs") and "regressed" not in quiet
    md = run_kbase("gate", a, b, "-f", "md").stdout
    assert md.splitlines()[2] == "**gate: INCOMPARABLE (exit 2)**" and "| class |" not in md
    allowed = run_kbase("gate", a, b, "--allow-incomparable")  # judged: then its rows are shown
    assert "Kernel diff" in allowed.stdout and re.search(r"^regressed\s", allowed.stdout, re.M), allowed


def test_an_error_names_a_switch_as_it_is_typed(exports, tmp_path):
    root, a, _ = exports
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    first = commit(repo, "x = 1\n", "one")
    for i in (2, 3):
        commit(repo, f"x = {i}\n", f"c{i}")
    db = tmp_path / "k.db"
    assert run_kbase("snapshot", a, "--repo", repo, "--rev", first, "--db", db, "-q").rc == 0
    r = run_kbase("diff", "HEAD~1", "HEAD", "--repo", repo, "--db", db, "--strict")
    assert r.rc == 2 and "--strict" in r.stderr, r
    assert "--strict True" not in r.stderr and "strict=" not in r.stderr, r.stderr
