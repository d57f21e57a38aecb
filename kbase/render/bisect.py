"""Render ``kbase bisect`` (``api.bisecting.BisectResult``): its JSON (schema ``kbase.bisect/1``), the terminal
text and a Markdown comment for a pull request. The first bad commit's diff is the table ``kbase diff``
prints (``render.diff``). Commit subjects and kernel names are data: escaped for each output."""

from __future__ import annotations

from typing import Any

from kbase import jsonable
from kbase.render.safe import md_text

BISECT_SCHEMA = "kbase.bisect/1"


def midpoint_dict(m: Any, subjects: dict[str, str]) -> dict[str, Any]:
    return {"commit": m.commit, "verdict": str(m.verdict), "reused": bool(m.reused), "runs": m.runs,
            "index": m.index, "baselines": list(m.baseline_ids), "subject": subjects.get(m.commit, ""),
            "why": m.why}


def bisect_doc(result: Any) -> dict[str, Any]:
    """The document other programs read: ``schema``, ``first_bad``, ``range``, ``runs``, ``midpoints`` (each
    ``commit``, ``verdict``, ``reused``) as issue 42 fixed them, and more beside."""
    from kbase.render.diff import diff_doc

    doc: dict[str, Any] = {
        "schema": BISECT_SCHEMA,
        "first_bad": result.first_bad,
        "range": list(result.range) if result.range else None,
        "runs": result.runs,
        "midpoints": [midpoint_dict(m, result.subjects) for m in result.midpoints],
        "good": result.good,
        "bad": result.bad,
        "workload": result.workload,
        "target": {"kind": str(result.target.kind), "pattern": result.target.pattern,
                   "label": result.target.label or result.target.pattern},
        "commits": len(result.commits) - 1,
        "repeats": result.repeats,
        "first_bad_subject": result.subjects.get(result.first_bad, "") if result.first_bad else None,
        "skipped": [m.commit for m in result.midpoints if str(m.verdict) == "skipped"],
        "undecided": [m.commit for m in result.midpoints if str(m.verdict) == "undecided"],
        "between": list(result.between),
        "diff": diff_doc(result.diff) if result.diff is not None else None,
        "notes": list(result.notes),
    }
    if result.plan is not None:
        p = result.plan
        doc["plan"] = {"commits": len(p.commits) - 1, "stored": p.stored, "first_probe": p.first_probe,
                       "max_probes": p.max_probes, "command": p.command}
    return jsonable.clean(doc)


def bisect_json(result: Any) -> str:
    return jsonable.dumps(bisect_doc(result))


def _short(c: str | None) -> str:
    return c[:12] if c else "-"


def headline(doc: dict[str, Any]) -> str:
    """One line: the answer, and what it cost."""
    target = doc["target"]
    what = "the step time" if target["kind"] == "step" else f"{target['kind']} {target['label']}"
    runs = f"{doc['runs']} run(s) of the capture command"
    if doc.get("plan") is not None:
        return f"bisect plan for {what}: {doc['plan']['commits']} commit(s) after GOOD"
    if doc["first_bad"]:
        return f"first bad commit for {what}: {_short(doc['first_bad'])} {doc['first_bad_subject'] or ''}".rstrip() \
            + f" ({runs})"
    if doc["range"]:
        lo, hi = doc["range"]
        why = []
        if doc["undecided"]:
            why.append(f"{len(doc['undecided'])} undecided")
        if doc["skipped"]:
            why.append(f"{len(doc['skipped'])} skipped")
        return (f"{what} changed after {_short(lo)} and by {_short(hi)}, not narrowed to one commit"
                + (f" ({', '.join(why)})" if why else "") + f" ({runs})")
    return f"no answer for {what} ({runs})"


def text_lines(doc: dict[str, Any]) -> list[str]:
    """Every line but the diff table: headline, the line bisected, the midpoint log, the plan."""
    out = [headline(doc), f"line: {_short(doc['good'])} (good) .. {_short(doc['bad'])} (bad), "
                          f"{doc['commits']} commit(s), workload {doc['workload']}"]
    plan = doc.get("plan")
    if plan is not None:
        out.append(f"at most {plan['max_probes']} midpoint(s) when each is decided, up to {doc['repeats']} run(s) "
                   "each when undecided")
        out.append(f"stored already (judged without running): {len(plan['stored'])} commit(s)")
        out.append(f"first midpoint: {_short(plan['first_probe'])}")
        out.append(f"each capture runs in a separate worktree: {plan['command']}")
        return out
    if doc["midpoints"]:
        out.append("midpoints (in the order judged):")
    for m in doc["midpoints"]:
        how = "reused" if m["reused"] else f"{m['runs']} run(s)"
        if m["reused"] and m["runs"]:
            how = f"reused + {m['runs']} run(s)"
        line = f"  {m['index']:>4}  {_short(m['commit'])}  {m['verdict']:<9}  {how:<16}  {m['subject']}"
        out.append(line.rstrip())
        if m["why"] and m["verdict"] in ("skipped", "undecided"):
            out.append(f"        {m['why']}")
    inside = set(doc["between"])
    if doc["range"] and inside & set(doc["undecided"]):
        out.append("undecided: like neither end beyond the noise (a partial change, or too noisy to tell): the range "
                   "holds the change, not a guess")
    if doc["range"] and inside & set(doc["skipped"]):
        out.append("skipped: the capture command failed there, so the first bad commit may be any between")
    out += [f"note: {n}" for n in doc["notes"]]
    return out


def print_bisect(result: Any, console: Any, wide: bool = False) -> None:
    from kbase.render.diff import print_diff

    doc = bisect_doc(result)
    for line in text_lines(doc):
        console.print(line, highlight=False, markup=False)
    if doc["diff"] is not None:
        console.print("")
        console.print(f"diff of {_short(doc['first_bad'])} against its parent:", highlight=False, markup=False)
        print_diff(doc["diff"], console, wide=wide)


def bisect_md(result: Any) -> str:
    """A pull-request comment: the answer, the midpoint log as a table, the first bad commit's diff."""
    from kbase.render.diff import diff_md

    doc = bisect_doc(result)
    out = ["## kbase bisect", "", f"**{md_text(headline(doc))}**", ""]
    out += [f"- {md_text(line)}" for line in text_lines(doc)[1:2]]
    if doc["midpoints"]:
        out += ["", "| # | commit | verdict | runs | subject |", "|---|---|---|---|---|"]
        for m in doc["midpoints"]:
            runs = "reused" if m["reused"] and not m["runs"] else str(m["runs"])
            out.append(f"| {m['index']} | `{m['commit'][:12]}` | {m['verdict']} | {runs} | "
                       f"{md_text(m['subject'], 72)} |")
    for m in doc["midpoints"]:
        if m["why"] and m["verdict"] == "skipped":
            out.append(f"\n- skipped `{m['commit'][:12]}`: {md_text(m['why'], 300)}")
    if doc["diff"] is not None:
        body = diff_md(doc["diff"]).split("\n", 1)[1]  # its own heading replaced by this one
        out += ["", f"### Diff of `{doc['first_bad'][:12]}` against its parent", body]
    return "\n".join(out).rstrip() + "\n"
