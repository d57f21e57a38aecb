"""The gate as JUnit XML, for CI systems that show test reports (GitLab ``reports: junit``). Every string
from a profile goes through ``xml_text``/``xml_attr``: well-formed XML 1.0 whatever a kernel name holds."""

from __future__ import annotations

from typing import Any

from kbase.analysis.names import display_names
from kbase.comparison.gate import FindingKind, Verdict
from kbase.comparison.result import row_delta_pct
from kbase.comparison.side import unit_of
from kbase.enums import GateStatus, KernelClass
from kbase.render.diff import finding_text, verdict_reasons
from kbase.render.safe import xml_attr, xml_text

CASES = (KernelClass.REGRESSED, KernelClass.NEW, KernelClass.SWAPPED, KernelClass.CANNOT_JUDGE)


def junit_xml(doc: dict[str, Any], verdict: Verdict) -> str:
    """A case per kernel the gate could fail on or says it did not judge alone (regressed, new, swapped, cannot
    judge: its class's word in ``system-out``), a failure per failing one; none when the sides are incomparable
    (the gate judged no kernel): one error says why."""
    unit = unit_of(doc.get("unit"))
    judged = verdict.status != GateStatus.INCOMPARABLE
    rows = [r for r in doc["kernels"] if r["class"] in CASES] if judged else []
    failing = {f.name for f in verdict.failing}
    # kernels sharing a short name are told apart in the message as in the tables (template arguments, #id)
    labels = display_names([r["name"] for r in rows], [r["short_name"] for r in rows])
    cases = []
    for r, label in zip(rows, labels):
        word = KernelClass(r["class"]).label
        said = f"{label} {word} {row_delta_pct(r)} {unit.per}"
        body = "<system-out>" + xml_text(f"{said}: {r['diagnosis']}") + "</system-out>"
        if r["name"] in failing:
            msg = f"{said}; {r['amdahl']}"
            body = f"<failure message={xml_attr(msg)}>{xml_text(r['diagnosis'])}</failure>" + body
        cases.append(f'  <testcase classname="kbase.gate" name={xml_attr(r["name"])}>{body}</testcase>')
    if verdict.status == GateStatus.INCOMPARABLE:
        cases.append('  <testcase classname="kbase.gate" name="comparability"><error message='
                     + xml_attr("; ".join(verdict_reasons(verdict))) + "/></testcase>")
    for f in verdict.failing:
        if f.kind == FindingKind.TOTAL:
            cases.append(f'  <testcase classname="kbase.gate" name="total kernel time {unit.per}"><failure message='
                         + xml_attr(finding_text(f, unit)) + "/></testcase>")
        elif f.kind == FindingKind.STEP:
            cases.append(f'  <testcase classname="kbase.gate.step" name={xml_attr(f.name)}><failure message='
                         + xml_attr(finding_text(f, unit)) + "/></testcase>")
        elif f.kind == FindingKind.OP_REGRESSED:
            cases.append(f'  <testcase classname="kbase.gate.op" name={xml_attr(f.name)}><failure message='
                         + xml_attr(finding_text(f, unit)) + "/></testcase>")
    if not cases:
        cases.append('  <testcase classname="kbase.gate" name="no kernel regression"/>')
    nfail = sum("<failure" in c for c in cases)
    nerr = sum("<error" in c for c in cases)
    # the unit every message is in, and why it was chosen (``work.align_units``' words)
    props = (f'  <properties><property name="unit" value={xml_attr(unit.value)}/><property name="unit_reason" '
             f'value={xml_attr(str(doc.get("unit_reason") or ""))}/></properties>')
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="kbase gate" tests="{len(cases)}" '
            f'failures="{nfail}" errors="{nerr}">\n{props}\n' + "\n".join(cases) + "\n</testsuite>\n")
