"""The HTML body of each report page (tables, verdict, notes) and its figures. Text is escaped with
``safe.html_text``; figures are plain dicts from ``figures``."""

from __future__ import annotations

import hashlib
import math

from kbase.analysis.diagnosis import LABELS, LEGEND
from kbase.analysis.names import short_id
from kbase.comparison.result import row_sides
from kbase.display import clip_balanced
from kbase.render.diff import cost_line, present
from kbase.render.leaderboard import fix_lines
from kbase.render.report import budget_pages, diff_figure
from kbase.render.report import figures as fig
from kbase.render.report.model import KernelSeries, LeaderboardView, ReportData, StepDiff
from kbase.render.report.safe import clip, html_text
from kbase.units import ABSENT, column_unit, fmt_ns

TC_TEXT = {"tc": ("✓", "tensor cores"), "fallback": ("⚠", "matmul/conv without a tensor-core path"),
           "na": ("-", "not tensor-core work")}


def kernel_page_name(name: str) -> str:
    """File name of a kernel's page: a hash of the full name (names are untrusted and long)."""
    return f"kernel-{hashlib.sha1(name.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}.html"


def table(head: list[str], rows: list[str], cls: str = "") -> str:
    """A table in its own scrolling box: at 390 px a wide table scrolls inside it, never the page."""
    heads = "".join(f"<th>{h}</th>" for h in head)
    return (f'<div class="table-wrap"><table{f" class={cls!r}" if cls else ""}><thead><tr>{heads}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _pct(x, digits: int = 1, signed: bool = False) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x):
        return ABSENT
    return f"{x:+.{digits}f}%" if signed else f"{x:.{digits}f}%"


def _share(x) -> str:
    return ABSENT if not isinstance(x, (int, float)) or not math.isfinite(x) else f"{x:.1%}"


def _effect(x) -> str:
    return ABSENT if not isinstance(x, (int, float)) or not math.isfinite(x) else f"{x:+.2%}"


def _tc_cell(tc: str | None, reason: str = "") -> str:
    symbol, text = TC_TEXT.get(tc or "na", TC_TEXT["na"])
    return f'<td class="tc-{html_text(tc or "na")}" title="{html_text(reason or text)}">{symbol}</td>'


def _notes(notes: list[str]) -> str:
    if not notes:
        return ""
    return '<ul class="notes">' + "".join(f"<li>{html_text(n)}</li>" for n in notes) + "</ul>"


def _first_last(values: list[float | None]) -> tuple[float | None, float | None]:
    present = [v for v in values if v is not None]
    return (present[0], present[-1]) if present else (None, None)


def trend_page(data: ReportData, kernels_with_pages: list[KernelSeries], stack: int,
               max_points: int) -> tuple[str, dict]:
    """index.html: the trend, the steps (each with its diff page) and a table of the kernels with a page each."""
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
    stacked = {k.name: fig.PALETTE[i % len(fig.PALETTE)] for i, k in enumerate(data.kernels[:stack])}
    ends = [_first_last(k.per_iter_ns) for k in kernels_with_pages]
    unit = column_unit(v for pair in ends for v in pair)
    for k, (a, b) in zip(kernels_with_pages, ends):
        change = (b - a) / a * 100 if a and b is not None else None
        swatch = f'<span class="swatch" style="background:{stacked[k.name]}"></span>' if k.name in stacked else ""
        rows.append(
            f'<tr><td class="name">{swatch}<a href="{kernel_page_name(k.name)}" title="{html_text(k.name)}">'
            f"{html_text(labels[k.name])}</a></td><td>{html_text(k.category)}</td>{_tc_cell(k.tc)}"
            f'<td class="num">{unit(a)}</td><td class="num">{unit(b)}</td>'
            f'<td class="num">{_pct(change, signed=True)}</td></tr>')
    budget_html, budget_figs = budget_pages.trend_section(data, max_points)
    body = (f"<h1>Kernel time per iteration per GPU — {html_text(data.title or data.workload)}</h1>"
            f'<p class="sub">{sub}</p>{_notes(notes)}<div class="chart" id="fig-trend"></div>'
            + budget_html + steps_table(data)
            + "<h2>Kernels (a page each; colour: its band in the trend)</h2>"
            + table(["kernel", "category", "TC", "first", "latest", "change"], rows))
    return body, {"fig-trend": fig.trend_figure(data, stack=stack, max_points=max_points), **budget_figs}


def steps_table(data: ReportData) -> str:
    """The steps ``kbase steps`` found, numbered as the trend labels them, each with its diff page."""
    if not data.steps:
        return ""
    written = {d.page for d in data.step_diffs if d.gate is not None} | ({"diff.html"} if data.gate else set())
    why = {d.page: d.note for d in data.step_diffs if d.gate is None}
    by_commit = {p.ref.commit: p.ref for p in data.commits}
    unit = column_unit(v for s in data.steps for v in (s.before_ns, s.after_ns))
    rows = []
    kernels = [(s.kernel, s.short_name or s.label) for s in data.steps if s.kernel]
    labels = fig.distinct_labels(list(dict.fromkeys(kernels)), limit=80)
    for k, s in enumerate(data.steps, 1):
        ref = by_commit.get(s.to_commit) or data.commits[s.index].ref
        link = (f'<a href="{html_text(s.page)}">{html_text(s.from_commit[:7])}→{html_text(s.to_commit[:7])}</a>'
                if s.page in written else html_text(why.get(s.page, "no diff page")))
        rows.append(f'<tr><td class="num">{k}</td><td>{html_text(s.kind)}</td><td class="name" '
                    f'title="{html_text(s.kernel or "")}">'
                    f'{html_text(labels.get(s.kernel or "") or clip(s.short_name or s.label, 80))}</td>'
                    f'<td class="num">{unit(s.before_ns)}</td><td class="num">{unit(s.after_ns)}</td>'
                    f'<td class="num">{_pct(s.delta_pct, signed=True)}</td><td class="num">{_effect(s.effect)}</td>'
                    f'<td class="hash">{html_text(ref.commit[:12])}</td>'
                    f'<td class="hash">{html_text((ref.date or "")[:10])}</td>'
                    f'<td class="text">{html_text(clip(ref.subject, 100))}</td><td>{link}</td></tr>')
    return ("<h2>Steps (kbase steps; numbered as on the chart)</h2>"
            + table(["#", "kind", "kernel", "before/iter", "after/iter", "change", "effect on iter", "commit", "date",
                     "subject", "diff"], rows))


def kernel_page(data: ReportData, k: KernelSeries, max_points: int) -> tuple[str, dict]:
    symbol, tc_text = TC_TEXT.get(k.tc, TC_TEXT["na"])
    steps = [(i, s) for i, s in enumerate(data.steps, 1) if s.kernel == k.name]
    step_text = "; ".join(f"{i}: {s.delta_pct:+.1f}% at {data.commits[s.index].ref.commit[:12]}" for i, s in steps
                          if 0 <= s.index < len(data.commits))
    body = (f"<h1>{html_text(clip_balanced(k.short_name, 110))} {html_text(short_id(k.name))}</h1>"
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
    steps = budget_pages.step_banner_parts(doc)  # a step finding: the gate's own words, like the kernels' names
    failing = [n for n in v["failing"] if n not in steps]
    parts = [f"failing: {kernels(failing)}" if failing else "",
             *(f'<span class="step-finding" title="{html_text(n)}">{html_text(t)}</span>' for n, t in steps.items()),
             f"accepted: {kernels([a['name'] for a in v['accepted']])}" if v["accepted"] else "",
             *(html_text(n) for n in doc.get("notes", []) if n.startswith("noise: "))]
    return (f'<div class="verdict gate-banner {status}" data-status="{status}" data-code="{int(v["code"])}">'
            f'<a href="diff.html">gate {html_text((doc["before"].get("commit") or "")[:12])} → '
            f'{html_text((doc["after"].get("commit") or "")[:12])}</a>: {head.get(v["status"], status)} '
            f"(exit {int(v['code'])})" + "".join(f'<span class="part">; {x}</span>' for x in parts if x) + "</div>")


def diff_page(doc: dict, step: StepDiff | None = None, others: list[StepDiff] | None = None,
              why: list[str] | None = None) -> tuple[str, dict]:
    """A diff page: ``doc`` is ``kbase gate --format json``'s document of its pair (the report's pair, or a
    detected step's: ``step``); ``others``: the step pages to link; ``why``: why the report shows this pair."""
    from kbase.comparison.side import unit_of, unit_why

    u = unit_of(doc.get("unit"))
    b, a = doc["before"], doc["after"]
    shown = [(label, t) for key, label in (("iteration_wall", f"GPU wall {u.per}"),
                                           ("step_wall", "CPU step wall time"),
                                           ("kernel", f"kernel time {u.per} per GPU"), ("compute", "compute"),
                                           ("communication", "communication (NCCL)"), ("memory", "memory"))
             if present(t := doc["totals"].get(key))]
    unit = column_unit(v for _, t in shown for v in (t["before"], t["after"]))
    totals = [f"<tr><td>{label}</td><td class='num'>{unit(t['before'])}</td><td class='num'>{unit(t['after'])}</td>"
              f"<td class='num'>{_pct(t['delta_pct'], signed=True)}</td></tr>" for label, t in shown]
    from kbase.comparison.result import row_delta_pct
    from kbase.enums import KernelClass, class_counts

    rows, _ = diff_figure.waterfall_rows(doc, limit=50)
    krows = []
    labels = fig.distinct_labels([(r["name"], r["short_name"]) for r in rows], limit=80)
    times = column_unit(v for r in rows for v in row_sides(r))
    cost = doc.get("cost")
    for r in rows:
        cls = KernelClass(r["class"]).label
        before, after = row_sides(r)
        money = (f"<td class='num'>{html_text(_money(r.get('cost_per_month'), cost['currency']))}</td>"
                 if cost else "")
        krows.append(
            f'<tr><td class="cls-{html_text(r["class"])}">{html_text(cls)}</td>'
            f'<td class="name" title="{html_text(r["name"])}">{html_text(labels[r["name"]])}</td>'
            f"{_tc_cell(r['tc_after'] or r['tc_before'])}<td class='num'>{times(before)}</td>"
            f"<td class='num'>{times(after)}</td><td class='num'>{row_delta_pct(r)}</td>"
            f"<td class='num'>{_effect(r['effect'])}</td>{money}"
            f"<td class='text'>{html_text(r.get('diagnosis') or '')}</td>"
            f"<td class='text'>{html_text(r.get('amdahl') or '')}</td></tr>")
    counts = html_text(class_counts(doc.get("counts", {})))
    what = ("<p class='sub'>Detected step: " + html_text("; ".join(step.labels)) + "</p>") if step else ""
    unchanged = "" if rows else ('<p class="nochange">No change: no kernel changed beyond noise '
                                 f"(kernel time {_pct(doc['totals']['kernel'].get('delta_pct'), signed=True)}).</p>")
    links = ""
    if others:
        links = ("<h2>Diffs of the detected steps</h2><ul class='notes'>"
                 + "".join(f'<li><a href="{html_text(d.page)}">{html_text(d.before[:12])} → {html_text(d.after[:12])}'
                           f"</a>: {html_text('; '.join(d.labels))}</li>" for d in others if d.gate is not None)
                 + "</ul>")
    budget_html, budget_figs = budget_pages.diff_section(doc)
    chosen = html_text(unit_why(u, doc.get("unit_reason")))  # why this unit (``work.align_units``' words)
    head = ["class", "kernel", "TC", f"before{u.short}", f"after{u.short}", "Δ%", f"effect on {u.value}"] + (
        ["cost/month"] if cost else []) + ["diagnosis", "Amdahl"]
    body = (f"<h1>Diff: {html_text(_side_label(b))} → {html_text(_side_label(a))}</h1>"
            f'<p class="sub">{html_text(b.get("commit") or "")} → {html_text(a.get("commit") or "")}; '
            f"{html_text(a.get('workload') or '')}; {a.get('gpus')} GPU(s); kernels: {counts}</p>" + what
            + _verdict_html(doc)
            + (f'<p class="cost">{html_text(cost_line(cost))}</p>' if cost else "") + unchanged
            + _notes(list(why or []) + _incomparable(doc) + doc.get("notes", []))
            + f"<h2>Where the kernel time moved (waterfall, {u.per} per GPU{chosen})</h2>"
            '<div class="chart" id="fig-diff"></div><h2>Totals</h2>'
            + table(["", "before", "after", "Δ"], totals)
            + budget_html
            + "<h2>Changed kernels and what they are worth (Amdahl)</h2>" + table(head, krows) + links)
    return body, {"fig-diff": diff_figure.diff_figure(doc), **budget_figs}


def _incomparable(doc: dict) -> list[str]:
    from kbase.render.incomparable import incomparable_hint

    hint = incomparable_hint(doc.get("mismatches", []))
    return [f"INCOMPARABLE: {m}" for m in doc.get("mismatches", [])] + ([f"to compare: {hint}"] if hint else [])


def _side_label(side: dict) -> str:
    """A side as the heading names it: its label, a full commit hash in it cut to 12 characters."""
    label, commit = side.get("label") or "", side.get("commit") or ""
    if commit and label.startswith(commit):  # a step's side: named by its full hash
        return commit[:12]
    return label


def _money(x, currency: str) -> str:
    from kbase.units import fmt_money

    return fmt_money(x, currency) if isinstance(x, (int, float)) and math.isfinite(x) else "-"


def leaderboard_page(view: LeaderboardView, top: int = 50) -> tuple[str, dict]:
    where, top_fig = fig.leaderboard_figures(view)
    budget_html, budget_figs = budget_pages.leaderboard_section(view.budget)
    matmul = [r for r in view.rows if r.tc in ("tc", "fallback")]
    on_tc = sum(r.per_iter_ns or 0 for r in matmul if r.tc == "tc")
    all_mm = sum(r.per_iter_ns or 0 for r in matmul)
    tc_line = (f"{on_tc / all_mm:.0%} of matmul/convolution time runs on tensor cores" if all_mm else
               "no matmul/convolution kernels")
    rows = []
    labels = fig.distinct_labels([(r.name, r.short_name) for r in view.rows[:top]], limit=80)
    shown = view.rows[:top]
    total, avg, per_iter = (column_unit(getattr(r, f) for r in shown) for f in ("total_ns", "avg_ns", "per_iter_ns"))
    span = column_unit(v for r in shown for v in (r.min_ns, r.max_ns))
    for i, r in enumerate(shown, 1):  # the columns in ``kbase top``'s order: the four reads first
        ceiling = f"{r.amdahl_ceiling:.3f}x" if r.amdahl_ceiling else "∞"
        why = "; ".join(x for x in (r.tc_reason if r.tc == "fallback" else "", r.diagnosis_reason
                                    if r.diagnosis else "") if x)
        rows.append(
            f"<tr><td class='num'>{i}</td><td class='name' title='{html_text(r.name)}'>{html_text(labels[r.name])}"
            f"</td>{_tc_cell(r.tc, r.tc_reason)}<td class='num'>{r.count:,}</td><td class='num'>{total(r.total_ns)}"
            f"</td><td class='num'>{avg(r.avg_ns)}</td><td class='num'>{span.range(r.min_ns, r.max_ns)}</td>"
            f"<td class='num'>{_share(r.share_kernel)}</td>"
            f"<td class='diag-{html_text(r.diagnosis or 'none')}' title='{html_text(r.diagnosis_reason)}'>"
            f"{html_text(LABELS.get(r.diagnosis or '', ''))}</td><td class='num'>{_share(r.share_window)}</td>"
            f"<td class='num'>{per_iter(r.per_iter_ns)}</td>"
            f"<td class='num'>{'-' if r.launches_per_iter is None else f'{r.launches_per_iter:,.1f}'}</td>"
            f"<td class='num'>{ceiling}</td><td>{html_text(r.category)}</td>"
            f"<td>{'fragmented' if r.fragmented else ''}</td><td class='why text'>{html_text(why)}</td></tr>")
    busy = view.compute_ns + view.communication_ns + view.memory_ns
    overlap = busy > view.wall_ns if view.wall_ns == view.wall_ns else False
    notes = [tc_line] + fix_lines((r.tc, r.tc_reason) for r in view.rows[:top])
    if overlap:
        notes.append(f"kernel time ({fmt_ns(busy)}) exceeds the iteration wall ({fmt_ns(view.wall_ns)}): "
                     "streams overlap (e.g. NCCL under compute), so idle is shown as 0")
    body = (f"<h1>Leaderboard of @{view.baseline_id} ({html_text(view.ref.commit[:12])})</h1>"
            f'<p class="sub">{html_text(view.gpu_models)} x {view.gpus}; {view.iterations} iteration(s); '
            f"{html_text(view.window_desc)}; iteration wall {fmt_ns(view.wall_ns)} per GPU</p>" + _notes(notes)
            + '<h2>Where the iteration goes</h2><div class="chart" id="fig-where"></div>' + budget_html
            + '<h2>Top kernels by time per iteration (colour: tensor-core state)</h2>'
            '<div class="chart" id="fig-top"></div>' + op_section(view, top)
            + "<h2>Leaderboard</h2><div class='table-wrap'><table><thead><tr><th>#</th><th>kernel</th><th>TC</th>"
            "<th>Count</th><th>Total</th>"
            "<th>Avg</th><th>Min–Max</th><th>%kernel</th><th>Diagnosis</th><th>%window</th><th>/iter/GPU</th>"
            "<th>launches/iter</th><th>Amdahl max</th><th>category</th><th>flags</th><th>why (⚠ fix; diagnosis)</th>"
            "</tr></thead><tbody>" + "".join(rows) + "</tbody></table></div>"
            f'<p class="sub">{html_text(LEGEND)}</p>')
    return body, {"fig-where": where, **budget_figs, "fig-top": top_fig}


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
    return ("<h2>By op (open an op for its kernels)</h2><div class='table-wrap'><table class='ops'><thead><tr>"
            "<th>#</th><th>op</th><th>/iter/GPU</th><th>launches/iter</th><th>%window</th><th>%kernel</th></tr>"
            "</thead><tbody>" + "".join(rows) + "</tbody></table></div>")
