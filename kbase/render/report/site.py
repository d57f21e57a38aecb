"""Write the report: one folder of static pages that opens from disk, with no server and no network.

Layout of ``out_dir``::

    index.html            trend of kernel time per iteration per GPU over commits, and the steps found
    diff.html             waterfall, totals, Amdahl figures and verdict of one diff (when given)
    diff-<a>-<b>.html     the same for each detected step's commits (``ReportData.step_diffs``)
    leaderboard.html      where one baseline's iteration goes (when given)
    kernel-<hash>.html    one page per top kernel
    assets/               plotly-basic.min.js (vendored, MIT, once for all pages), report.js, report.css
    kbase-report.json     manifest: schema, pages, when; marks the folder as a kbase report

Each page carries its figures as JSON in ``<script type="application/json">`` (escaped by
``safe.script_json``) and loads only files of the folder; a Content-Security-Policy allows scripts
from the folder only (no inline script, no network), so even a name that got past escaping could
not run.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from kbase.analysis.names import short_id
from kbase.errors import InputError
from kbase.render.report import pages
from kbase.render.report.model import REPORT_SCHEMA, ReportData
from kbase.render.report.safe import html_text, script_json
from kbase.safe_write import OutputDir

ASSETS = Path(__file__).with_name("assets")
ASSET_FILES = ("plotly-basic.min.js", "report.js", "report.css", "LICENSE.plotly.txt")
MANIFEST = "kbase-report.json"
CSP = ("default-src 'none'; script-src 'self' file:; style-src 'self' file: 'unsafe-inline'; "
       "img-src 'self' file: data: blob:; font-src 'self' file: data:")


def _page(title: str, here: str, nav: list[tuple[str, str]], body: str, figures: dict, footer: str,
          banner: str = "") -> str:
    links = "".join(f'<a href="{href}"' + (' class="here"' if href == here else "") + f">{html_text(label)}</a>"
                    for label, href in nav)
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html_text(title)}</title><link rel=\"stylesheet\" href=\"assets/report.css\"></head><body>"
        f'<header><span class="brand">kbase report</span><nav>{links}</nav></header>'
        f'<main><div id="kbase-error" hidden></div>{banner}{body}</main><footer>{footer}</footer>'
        f'<script type="application/json" id="kbase-figures">{script_json(figures)}</script>'
        '<script src="assets/plotly-basic.min.js"></script><script src="assets/report.js"></script>'
        "</body></html>\n")


def _prepare(out: OutputDir, overwrite: bool) -> None:
    names = out.names()
    if names:
        if out.kind(MANIFEST) != "file" and not overwrite:
            raise InputError(f"{out.path}: folder is not empty and holds no kbase report (choose an empty folder)")
        for old in names:  # a previous report's pages: kernels may have changed (links: the link alone)
            if old.endswith(".html") and out.kind(old) in ("file", "link"):
                out.remove(old)


def build_report(data: ReportData, out_dir: Path, *, stack_kernels: int = 8, kernel_pages: int = 25,
                 max_points: int = 1000, overwrite: bool = False) -> list[Path]:
    """Write the report of ``data`` into ``out_dir`` and return the pages written (index first).

    ``stack_kernels``: kernels stacked on the trend (the rest is "other"); ``kernel_pages``: how many
    of ``data.kernels`` get a page; ``max_points``: points per series before consecutive commits are
    averaged. A non-empty ``out_dir`` must hold a previous kbase report (its pages are replaced)
    unless ``overwrite``.
    """
    if not data.commits:
        raise InputError("nothing to report: the history has no commits")
    out_dir = Path(out_dir)
    # (every file through ``safe_write``: nothing in the folder is followed, see its rules)
    with OutputDir(out_dir, "out") as out:
        _prepare(out, overwrite)
        with out.subdir("assets") as assets:
            for name in ASSET_FILES:
                assets.copy_in(name, ASSETS / name)
        return _write_pages(data, out, kernel_pages, stack_kernels, max_points)


def _write_pages(data: ReportData, out: OutputDir, kernel_pages: int, stack_kernels: int,
                 max_points: int) -> list[Path]:
    with_pages = data.kernels[:kernel_pages]
    nav = [("Trend", "index.html")]
    if data.gate is not None:
        nav.append(("Diff", "diff.html"))
    if data.leaderboard is not None:
        nav.append(("Leaderboard", "leaderboard.html"))
    generated = data.generated_at or datetime.now(UTC).isoformat(timespec="seconds")
    footer = (f"kbase report of {html_text(data.workload)}, generated {html_text(generated)}. "
              "Times are per iteration per GPU. Charts: plotly.js (MIT), bundled in assets/.")
    title = f"kbase — {data.title or data.workload}"
    written: list[Path] = []
    from kbase.render.diff import diff_doc

    doc = None
    if data.gate is not None:
        doc = diff_doc(data.gate.comparison, data.gate.verdict)  # as kbase gate --format json writes it
    banner = pages.gate_banner(doc) if doc is not None else ""  # every page states the gate's verdict

    def write(file: str, heading: str, here: str, built: tuple[str, dict]) -> None:
        written.append(out.write(file, _page(f"{heading} — {title}", here, nav, built[0], built[1], footer, banner)))

    write("index.html", "Trend", "index.html", pages.trend_page(data, with_pages, stack_kernels, max_points))
    step_pages = [d for d in data.step_diffs if d.gate is not None]
    if doc is not None:
        write("diff.html", "Diff", "diff.html", pages.diff_page(doc, others=step_pages, why=data.pair_notes))
    for d in step_pages:
        assert d.gate is not None
        step_doc = diff_doc(d.gate.comparison, d.gate.verdict)
        write(d.page, f"Step {d.before[:12]} → {d.after[:12]}", "",
              pages.diff_page(step_doc, step=d, others=step_pages))
    if data.leaderboard is not None:
        write("leaderboard.html", "Leaderboard", "leaderboard.html", pages.leaderboard_page(data.leaderboard))
    for k in with_pages:
        write(pages.kernel_page_name(k.name), f"{k.short_name[:50]} {short_id(k.name)}", "",
              pages.kernel_page(data, k, max_points))
    manifest = {"schema": REPORT_SCHEMA, "workload": data.workload, "branch": data.branch, "generated_at": generated,
                "commits": len(data.commits), "pages": [p.name for p in written],
                "kernel_pages": {p: k.name for p, k in ((pages.kernel_page_name(k.name), k) for k in with_pages)}}
    out.write(MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return written
