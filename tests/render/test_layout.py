"""The width-aware table layout (``kbase.render.layout``): columns drop by priority, names are cut with an
ellipsis (their ``#id`` kept), nothing wraps, and ``--wide`` keeps everything."""

from __future__ import annotations

import io

import pytest
from rich.cells import cell_len
from rich.console import Console

from kbase.analysis.names import display_names, short_id
from kbase.render import diff as render_diff
from kbase.render import leaderboard as render_lb
from kbase.render.layout import ELLIPSIS, Column, ellipsize, fit, print_table, table_overhead

LONG = ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)")


def _rows(n: int = 6) -> list[dict[str, str]]:
    names = [LONG.replace("FillFunctor", f"F{i}Functor") for i in range(n)] + ["void gemm_kernel<128>(float*)"]
    shown = display_names(names)
    rows = []
    for i, (full, disp) in enumerate(zip(names, shown), 1):
        rows.append({"rank": str(i), "kernel": disp, "kernel_id": short_id(full), "cat": "comp", "tc": "-",
                     "count": "1,024", "total": "12.345 ms", "avg": "12.06 µs", "med": "12.00 µs", "min": "11.00 µs",
                     "max": "40.00 µs", "std": "1.00 µs", "per_iter": "1.234 ms", "share_window": "12.3%",
                     "share_kernel": "45.6%", "amdahl": "1.838x", "flags": "unstable 4x", "minmax": "11.0–40.0 µs",
                     "diag": "not expected", "why": "not matmul/convolution; fat (45.6% of kernel time) and not expected"})
    return rows


def _render(columns, rows, width: int, wide: bool = False) -> tuple[str, object]:
    buf = io.StringIO()
    con = Console(file=buf, width=width, color_system=None, soft_wrap=False)
    fitted = print_table(con, columns, rows, wide=wide, title="t")
    return buf.getvalue(), fitted


@pytest.mark.parametrize("width", [50, 80, 120, 200])
def test_leaderboard_fits(width):
    rows = _rows()
    text, fitted = _render(render_lb._columns(per_gpu=False), rows, width)
    lines = text.splitlines()
    assert max(cell_len(line) for line in lines) <= width
    kept = {c.key for c in fitted.columns}
    assert {"rank", "kernel", "tc", "count", "total", "avg"} <= kept  # priority 0 (the four reads) survives
    assert "why" not in kept  # a reason is --wide only
    body = [line for line in lines if line.strip()[:1].isdigit()]
    assert len(body) == len(rows)  # one line per row: nothing wrapped
    cells = [line.split("   ")[1] for line in body]
    assert len(set(cells)) == len(cells)  # each row tells its kernel apart
    for cell, r in zip(cells, rows):  # by its name or its id, or (cut to a few characters at 50 columns) its ends
        assert r["kernel_id"] in cell or r["kernel"] in cell or (ELLIPSIS in cell and width < 80)
    if fitted.dropped:
        note = lines[-1]
        assert note.startswith("hidden at this width (--wide shows them): ")
        assert fitted.dropped[0].header in note


def test_narrow_drops_secondary_columns_by_priority():
    rows = _rows()
    f80 = fit(render_lb.COLUMNS, rows, 80)
    f200 = fit(render_lb.COLUMNS, rows, 200)
    assert len(f80.columns) < len(f200.columns)
    # a dropped column never outranks a kept one (ties aside)
    assert min(c.priority for c in f80.dropped) >= max(c.priority for c in f80.columns if c not in f80.dropped)
    assert f80.width <= 80 and f200.width <= 200


def test_wide_keeps_every_column_uncut():
    rows = _rows()
    text, fitted = _render(render_lb.COLUMNS, rows, 80, wide=True)
    assert not fitted.dropped and len(fitted.columns) == len(render_lb.COLUMNS)
    for r in rows:
        assert r["kernel"] in text
    assert "hidden at this width" not in text


def test_cut_cells_end_with_ellipsis_and_keep_the_id():
    rows = _rows()
    text, fitted = _render(render_lb.COLUMNS, rows, 80)
    cut = [r for r in rows if cell_len(r["kernel"]) > fitted.widths["kernel"]]
    assert cut, "the long names must be cut at 80 columns"
    for r in cut:
        line = next(line for line in text.splitlines() if r["kernel_id"] in line)
        assert ELLIPSIS in line


def test_tiebreak_keeps_unique_names_apart():
    cols = [Column("k", "kernel", 0, min_width=12, shrink=True, keep_tail=True, justify="left", tiebreak="id"),
            Column("v", "value", 0)]
    rows = [{"k": "sm80_xmma_gemm_AAAA_tile128_cublas", "id": "#aaaaaa", "v": "1"},
            {"k": "sm80_xmma_gemm_BBBB_tile128_cublas", "id": "#bbbbbb", "v": "2"}]
    text, _ = _render(cols, rows, 24)
    assert "#aaaaaa" in text and "#bbbbbb" in text


def test_another_column_slots_in_by_priority():
    """A new diff column (e.g. a minimum detectable effect) only needs a spec and a key in the rows."""
    cols = list(render_diff.COLUMNS)
    cols.insert(7, Column("mde", "MDE", 3))
    row = {c.key: "x" for c in render_diff.COLUMNS} | {"kernel": "some_kernel", "mde": "±1.2%"}
    wide = fit(cols, [row], 300)
    assert "mde" in {c.key for c in wide.columns}
    narrow = fit(cols, [row], 80)
    assert "mde" in {c.key for c in narrow.dropped} and "kernel" in {c.key for c in narrow.columns}


@pytest.mark.parametrize("text,width,tail", [("abcdefghij", 5, False), ("abcdefghij", 5, True),
                                             ("name_of_kernel #a1b2c3", 16, True), ("x", 1, False),
                                             ("日本語のカーネル名", 7, False)])
def test_ellipsize(text, width, tail):
    out = ellipsize(text, width, tail)
    assert cell_len(out) <= width
    assert (ELLIPSIS in out) if cell_len(text) > width else out == text
    if tail and "#" in text:
        assert out.endswith("#a1b2c3")
    assert ellipsize("short", 10) == "short"


def test_overhead_matches_rich():
    cols = [Column("a", "a", 0), Column("b", "bb", 0), Column("c", "ccc", 0)]
    text, fitted = _render(cols, [{"a": "1", "b": "22", "c": "333"}], 80)
    header = next(line for line in text.splitlines() if "bb" in line)
    assert cell_len(header.rstrip()) == 1 + 2 + 3 + table_overhead(3)


def test_names_are_inert():
    """Markup stays text, control characters and bidi overrides become visible escapes."""
    evil = "k[bold]x[/bold] \x1b[31mred\x1b[0m\ttab\u202e"
    cols = [Column("k", "kernel", 0, shrink=True, justify="left")]
    buf = io.StringIO()
    con = Console(file=buf, width=120, force_terminal=True, color_system="standard")
    print_table(con, cols, [{"k": evil}], title="t [red]x[/red]")
    out = buf.getvalue()
    assert "k[bold]x[/bold] \\x1b[31mred\\x1b[0m\\ttab\\u202e" in out
    assert "\x1b[31m" not in out and "\u202e" not in out and "t [red]x[/red]" in out


@pytest.mark.slow
def test_table_text_prints_what_the_rich_table_prints():
    """``print_table`` lays a table out itself (``table_text``) where rich would not squeeze it: on random
    tables (wide characters, escapes, markup-like text, trailing blanks, styles, titles, --wide) the
    characters equal rich's ``Table`` exactly, and on a terminal too once the colour codes are removed."""
    import io
    import random
    import re

    from kbase.render.layout import _plain_layout, _print_rich, make_table, table_text

    rng = random.Random(11)
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    chars = "abcxyz #<>()[]é漢字…-_ \x1b\t\u202e[bold]"
    compared = 0
    for _ in range(600):
        n = rng.randint(1, 7)
        cols = [Column(f"k{i}", rng.choice(["#", "Kernel", "Count", "x", "A longer header", "漢字"]),
                       rng.randint(0, 5), min_width=rng.randint(1, 10), justify=rng.choice(["left", "right"]),
                       shrink=rng.random() < 0.4, keep_tail=rng.random() < 0.2, tiebreak=rng.choice([None, "id"]),
                       max_width=rng.choice([None, 5, 20])) for i in range(n)]
        rows = [{**{f"k{i}": "".join(rng.choice(chars) for _ in range(rng.randint(0, 25))) for i in range(n)},
                 "id": f"#{rng.randint(0, 999):03d}"} for _ in range(rng.randint(0, 6))]
        width, wide = rng.randint(20, 160), rng.random() < 0.2
        title = rng.choice([None, "Kernel leaderboard", "3 baseline(s)", "a long title " * rng.randint(1, 9)])
        styles = rng.choice([None, [rng.choice([None, "red", "green", "bold"]) for _ in rows]])
        fitted = fit(cols, rows, width, wide)
        if not _plain_layout(fitted, title, max(width, fitted.width) if wide else width):
            continue
        compared += 1
        for term in (False, True):
            outs = []
            for ours in (False, True):
                buf = io.StringIO()
                con = Console(file=buf, width=width, force_terminal=term, color_system="standard" if term else None,
                              highlight=False, markup=False, emoji=False)
                if ours:
                    con.print(table_text(fitted, rows, title=title, row_styles=styles), soft_wrap=True)
                else:
                    _print_rich(con, fitted, make_table(fitted, rows, title=title, row_styles=styles), wide)
                outs.append(ansi.sub("", buf.getvalue()) if term else buf.getvalue())
            assert outs[0] == outs[1], (term, width, wide, title)
    assert compared > 300
