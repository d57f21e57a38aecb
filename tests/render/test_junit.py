"""JUnit output of a gate (``kbase.render.junit``): each failing kernel is its own test case, told apart by
its name's short id even when two kernels share a short name."""

from __future__ import annotations

import xml.etree.ElementTree as ET


def test_junit_tells_apart_two_regressed_kernels_with_one_short_name():
    from kbase.analysis.names import short_id
    from kbase.comparison.gate import Finding, FindingKind, Verdict
    from kbase.enums import GateStatus
    from kbase.render.junit import junit_xml

    names = [f"void elementwise_kernel<{w}, Fill<float>>(int)" for w in (2, 4)]
    rows = [{"name": n, "short_name": "elementwise_kernel", "class": "regressed", "delta_pct": 12.0,
             "amdahl": "worth 1%", "diagnosis": "slower per launch"} for n in names]
    failing = [Finding(kind=FindingKind.REGRESSED, name=n, short_name="elementwise_kernel") for n in names]
    verdict = Verdict(status=GateStatus.FAIL, code=1, failing=failing)
    suite = ET.fromstring(junit_xml({"kernels": rows}, verdict))
    messages = [tc.find("failure").get("message") for tc in suite.iter("testcase")]
    assert len(messages) == 2 and all(short_id(n) in m for n, m in zip(names, messages)), messages
