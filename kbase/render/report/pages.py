"""The HTML body of each report page (tables, verdict, notes) and its figures. Text is escaped with
``safe.html_text``; figures are plain dicts from ``figures``."""

from __future__ import annotations

import hashlib
import math

from kbase.render.report import figures as fig
from kbase.render.report.model import KernelSeries, LeaderboardView, ReportData
from kbase.render.report.safe import clip, html_text

TC_TEXT = {"tc": ("✓", "tensor cores"), "fallback": ("⚠", "matmul/conv without a tensor-core path"),
           "na": ("-", "not tensor-core work")}


def kernel_page_name(name: str) -> str:
    """File name of a kernel's page: a hash of the full name (names are untrusted and long)."""
    return f"kernel-{hashlib.sha1(name.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}.html"


def fmt_ns(ns: float | None) -> str:
    if ns is None or (isinstance(ns, float) and not math.isfinite(ns)):
        return "-"
    a = abs(ns)
    if a >= 1e9:
        return f"{ns / 1e9:.3f} s"
    if a >= 1e6:
        return f"{ns / 1e6:.3f} ms"
    if a >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.0f} ns"


def _pct(x, digits: int = 1, signed: bool = False) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        return "new" if x in ("inf", float("inf")) else "-"
    return f"{x:+.{digits}f}%" if signed else f"{x:.{digits}f}%"


def _share(x) -> str:
    return "-" if not isinstance(x, (int, float)) or not math.isfinite(x) else f"{x:.1%}"


def _effect(x) -> str:
    return "-" if not isinstance(x, (int, float)) or not math.isfinite(x) else f"{x:+.2%}"


def _tc_cell(tc: str | None) -> str:
    symbol, text = TC_TEXT.get(tc or "na", TC_TEXT["na"])
    return f'<td class="tc-{html_text(tc or "na")}" title="{html_text(text)}">{symbol}</td>'


def _notes(notes: list[str]) -> str:
    if not notes:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{html_text(n)}</li>" for n in notes) + "</ul>"


def _first_last(values: list[float | None]) -> tuple[float | None, float | None]:
    present = [v for v in values if v is not None]
    return (present[0], present[-1]) if present else (None, None)


def trend_page(data: ReportData, kernels_with_pages: list[KernelSeries], stack: int,
               max_points: int) -> tuple[str, dict]:
    """index.html: the trend and a table of the kernels with a page each."""
    commits = data.commits
    first, last = commits[0].ref, commits[-1].ref
    agg = len(commits) > max_points
    sub = (f"{len(commits):,} commits, {html_text(first.commit[:12])} ({html_text((first.date or '')[:10])}) → "
           f"{html_text(last.commit[:12])} ({html_text((last.date or '')[:10])}); GPUs: {commits[-1].gpus}; "
           f"unit: {html_text(commits[-1].unit)}")
    notes = list(data.notes)
    if agg:
        notes.append(f"{len(commits):,} commits drawn as {max_points:,} points: each point is the mean of about "
                     f"{len(commits) / max_points:.0f} consecutive commits (hover names them)")
    if not data.steps:
        notes.append("no step changes: kbase steps finds none over these baselines")
    rows = []
    labels = fig.distinct_labels([(k.name, k.short_name) for k in kernels_with_pages], limit=80)
    for k in kernels_with_pages:
        a, b = _first_last(k.per_iter_ns)
        change = (b - a) / a * 100 if a and b is not None else None
        rows.append(
            f'<tr><td class="name"><a href="{kernel_page_name(k.name)}" title="{html_text(k.name)}">'
            f"{html_text(labels[k.name])}</a></td><td>{html_text(k.category)}</td>{_tc_cell(k.tc)}"
            f'<td class="num">{fmt_ns(a)}</td><td class="num">{fmt_ns(b)}</td>'
            f'<td class="num">{_pct(change, signed=True)}</td></tr>')
    body = (f"<h1>Kernel time per iteration per GPU — {html_text(data.title or data.workload)}</h1>"
            f'<p class="sub">{sub}</p>{_notes(notes)}<div class="chart" id="fig-trend"></div>'
            "<h2>Kernels (a page each)</h2><table><thead><tr><th>kernel</th><th>category</th><th>TC</th>"
            "<th>first</th><th>latest</th><th>change</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    return body, {"fig-trend": fig.trend_figure(data, stack=stack, max_points=max_points)}


def kernel_page(data: ReportData, k: KernelSeries, max_points: int) -> tuple[str, dict]:
    symbol, tc_text = TC_TEXT.get(k.tc, TC_TEXT["na"])
    steps = [s for s in data.steps if s.kernel == k.name]
    step_text = "; ".join(f"{s.delta_pct:+.1f}% at {data.commits[s.index].ref.commit[:12]}" for s in steps
                          if 0 <= s.index < len(data.commits))
    body = (f"<h1>{html_text(clip(k.short_name, 120))}</h1>"
            f'<p class="sub"><code>{html_text(k.name)}</code></p>'
            f'<p class="sub">{html_text(k.category)}; tensor cores: {symbol} {html_text(tc_text)}'
            + (f"; steps: {html_text(step_text)}" if step_text else "") + "</p>"
            '<div class="chart" id="fig-kernel"></div>'
            '<p class="sub">Band: the 10th–90th percentile of the per-iteration time within each capture '
            "(iteration-to-iteration noise). Hover a point for its commit.</p>")
    return body, {"fig-kernel": fig.kernel_figure(data, k, max_points=max_points)}


def _verdict_html(doc: dict) -> str:
    v = doc.get("verdict")
    if not v:
        return '<div class="verdict warn-only">no gate verdict in this diff</div>'
    head = {"pass": "PASS", "fail": "FAIL", "incomparable": "INCOMPARABLE", "warn-only": "FAIL (warn-only)"}
    items = [*v.get("reasons", []), *(f"warning: {w}" for w in v.get("warnings", [])),
             *(f"accepted: {a.get('name', '')} ({a.get('reason', '')})" for a in v.get("accepted", []))]
    return (f'<div class="verdict {html_text(v["status"])}">gate: {head.get(v["status"], html_text(v["status"]))} '
            f"(exit {int(v['code'])})" + ("<ul>" + "".join(f"<li>{html_text(i)}</li>" for i in items) + "</ul>"
                                           if items else "") + "</div>")


def gate_banner(doc: dict) -> str:
    """The gate's verdict of the diff page's pair, at the top of every page: what ``kbase gate`` of that pair
    says (status and exit code, failing and accepted kernels, the noise behind the decisions)."""
    v = doc["verdict"]
    short = {r["name"]: r["short_name"] for r in doc["kernels"]}

    def kernels(names: list[str]) -> str:
        return ", ".join(f'<span class="kernel" title="{html_text(n)}">{html_text(clip(short.get(n, n), 60))}</span>'
                         for n in names)

    head = {"pass": "PASS", "fail": "FAIL", "incomparable": "INCOMPARABLE", "warn-only": "FAIL (warn-only)"}
    status = html_text(v["status"])
    parts = [f"failing: {kernels(v['failing'])}" if v["failing"] else "",
             f"accepted: {kernels([a['name'] for a in v['accepted']])}" if v["accepted"] else "",
             *(html_text(n) for n in doc.get("notes", []) if n.startswith("noise: "))]
    return (f'<div class="verdict gate-banner {status}" data-status="{status}" data-code="{int(v["code"])}">'
            f'<a href="diff.html">gate {html_text((doc["before"].get("commit") or "")[:12])} → '
            f'{html_text((doc["after"].get("commit") or "")[:12])}</a>: {head.get(v["status"], status)} '
            f"(exit {int(v['code'])})" + "".join(f'<span class="part">; {x}</span>' for x in parts if x) + "</div>")


def diff_page(doc: dict) -> tuple[str, dict]:
    b, a = doc["before"], doc["after"]
    totals = []
    for key, label in (("iteration_wall", "GPU wall per iteration"), ("step_wall", "CPU step wall time"),
                       ("kernel", "kernel time per iteration per GPU"), ("compute", "compute"),
                       ("communication", "communication (NCCL)"), ("memory", "memory")):
        t = doc["totals"].get(key)
        if t and t.get("before") is not None:
            totals.append(f"<tr><td>{label}</td><td class='num'>{fmt_ns(t['before'])}</td>"
                          f"<td class='num'>{fmt_ns(t['after'])}</td>"
                          f"<td class='num'>{_pct(t['delta_pct'], signed=True)}</td></tr>")
    rows, _ = fig.waterfall_rows(doc, limit=50)
    krows = []
    labels = fig.distinct_labels([(r["name"], r["short_name"]) for r in rows], limit=80)
    for r in rows:
        cls = ("swap: " if r.get("swap") else "") + str(r["class"]).replace("regressed_below_floor",
                                                                             "regressed (below gate floor)")
        krows.append(
            f'<tr><td class="cls-{html_text(r["class"])}">{html_text(cls)}</td>'
            f'<td class="name" title="{html_text(r["name"])}">{html_text(labels[r["name"]])}</td>'
            f"{_tc_cell(r['tc_after'] or r['tc_before'])}<td class='num'>{fmt_ns(r['before'])}</td>"
            f"<td class='num'>{fmt_ns(r['after'])}</td><td class='num'>{_pct(r['delta_pct'], signed=True)}</td>"
            f"<td class='num'>{_effect(r['effect'])}</td>"
            f"<td>{html_text(r.get('diagnosis') or '')}</td><td>{html_text(r.get('amdahl') or '')}</td></tr>")
    counts = ", ".join(f"{n} {html_text(c)}" for c, n in doc.get("counts", {}).items() if n)
    body = (f"<h1>Diff: {html_text(b.get('label') or '')} → {html_text(a.get('label') or '')}</h1>"
            f'<p class="sub">{html_text(b.get("commit") or "")} → {html_text(a.get("commit") or "")}; '
            f"{html_text(a.get('workload') or '')}; {a.get('gpus')} GPU(s); kernels: {counts}</p>"
            + _verdict_html(doc)
            + _notes([f"INCOMPARABLE: {m}" for m in doc.get("mismatches", [])] + doc.get("notes", []))
            + "<h2>Where the kernel time moved (waterfall, per iteration per GPU)</h2>"
            '<div class="chart" id="fig-diff"></div><h2>Totals</h2><table><thead><tr><th></th><th>before</th>'
            "<th>after</th><th>Δ</th></tr></thead><tbody>" + "".join(totals) + "</tbody></table>"
            "<h2>Changed kernels and what they are worth (Amdahl)</h2><table><thead><tr><th>class</th><th>kernel</th>"
            "<th>TC</th><th>before/iter</th><th>after/iter</th><th>Δ%</th><th>effect on iter</th><th>diagnosis</th>"
            "<th>Amdahl</th></tr></thead><tbody>" + "".join(krows) + "</tbody></table>")
    return body, {"fig-diff": fig.diff_figure(doc)}


def leaderboard_page(view: LeaderboardView, top: int = 50) -> tuple[str, dict]:
    where, top_fig = fig.leaderboard_figures(view)
    matmul = [r for r in view.rows if r.tc in ("tc", "fallback")]
    on_tc = sum(r.per_iter_ns or 0 for r in matmul if r.tc == "tc")
    all_mm = sum(r.per_iter_ns or 0 for r in matmul)
    tc_line = (f"{on_tc / all_mm:.0%} of matmul/convolution time runs on tensor cores" if all_mm else
               "no matmul/convolution kernels")
    rows = []
    labels = fig.distinct_labels([(r.name, r.short_name) for r in view.rows[:top]], limit=80)
    for i, r in enumerate(view.rows[:top], 1):
        ceiling = f"{r.amdahl_ceiling:.3f}x" if r.amdahl_ceiling else "∞"
        rows.append(
            f"<tr><td class='num'>{i}</td><td class='name' title='{html_text(r.name)}'>{html_text(labels[r.name])}"
            f"</td><td>{html_text(r.category)}</td>{_tc_cell(r.tc)}<td class='num'>{fmt_ns(r.per_iter_ns)}</td>"
            f"<td class='num'>{'-' if r.launches_per_iter is None else f'{r.launches_per_iter:,.1f}'}</td>"
            f"<td class='num'>{fmt_ns(r.avg_ns)}</td><td class='num'>{_share(r.share_window)}</td>"
            f"<td class='num'>{_share(r.share_kernel)}</td><td class='num'>{ceiling}</td>"
            f"<td>{'fragmented' if r.fragmented else ''}</td></tr>")
    busy = view.compute_ns + view.communication_ns + view.memory_ns
    overlap = busy > view.wall_ns if view.wall_ns == view.wall_ns else False
    notes = [tc_line]
    if overlap:
        notes.append(f"kernel time ({fmt_ns(busy)}) exceeds the iteration wall ({fmt_ns(view.wall_ns)}): "
                     "streams overlap (e.g. NCCL under compute), so idle is shown as 0")
    body = (f"<h1>Leaderboard of @{view.baseline_id} ({html_text(view.ref.commit[:12])})</h1>"
            f'<p class="sub">{html_text(view.gpu_models)} x {view.gpus}; {view.iterations} iteration(s); '
            f"{html_text(view.window_desc)}; iteration wall {fmt_ns(view.wall_ns)} per GPU</p>" + _notes(notes)
            + '<h2>Where the iteration goes</h2><div class="chart" id="fig-where"></div>'
            '<h2>Top kernels by time per iteration (colour: tensor-core state)</h2>'
            '<div class="chart" id="fig-top"></div>' + op_section(view, top)
            + "<h2>Leaderboard</h2><table><thead><tr><th>#</th><th>kernel</th><th>category</th><th>TC</th>"
            "<th>/iter/GPU</th><th>launches/iter</th><th>avg/launch</th><th>%window</th><th>%kernel</th>"
            "<th>Amdahl max</th><th>flags</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    return body, {"fig-where": where, "fig-top": top_fig}


def op_section(view: LeaderboardView, top: int = 50) -> str:
    """The leaderboard grouped by the op that launched each kernel: one row per op, each opening (``<details>``)
    onto its kernels and their share of the op's time."""
    if view.ops is None:
        return ("<h2>By op</h2><p class='sub'>this baseline stores no op information (stored before op "
                "attribution, or a profile without op ranges)</p>")
    rows = []
    for i, r in enumerate(view.ops[:top], 1):
        labels = fig.distinct_labels([(k.name, k.short_name) for k in r.kernels], limit=80)
        kernels = "".join(
            f"<tr><td class='name' title='{html_text(k.name)}'>{html_text(labels[k.name])}</td>"
            f"<td class='num'>{fmt_ns(k.per_iter_ns)}</td>"
            f"<td class='num'>{'-' if k.launches_per_iter is None else f'{k.launches_per_iter:,.1f}'}</td>"
            f"<td class='num'>{_share(k.share_op)}</td></tr>" for k in r.kernels)
        name = "(no op)" if r.op is None else r.op
        rows.append(
            f"<tr class='op'><td class='num'>{i}</td><td class='name'><details><summary title='{html_text(name)}'>"
            f"{html_text(clip(name, 100))} ({len(r.kernels)} kernel(s))</summary><table class='op-kernels'><thead>"
            "<tr><th>kernel</th><th>/iter/GPU</th><th>launches/iter</th><th>%op</th></tr></thead><tbody>"
            f"{kernels}</tbody></table></details></td><td class='num'>{fmt_ns(r.per_iter_ns)}</td>"
            f"<td class='num'>{'-' if r.launches_per_iter is None else f'{r.launches_per_iter:,.1f}'}</td>"
            f"<td class='num'>{_share(r.share_window)}</td><td class='num'>{_share(r.share_kernel)}</td></tr>")
    return ("<h2>By op (open an op for its kernels)</h2><table class='ops'><thead><tr><th>#</th><th>op</th>"
            "<th>/iter/GPU</th><th>launches/iter</th><th>%window</th><th>%kernel</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table>")
