"""JUnit output of a gate (``kbase.render.junit``): each failing kernel is its own test case, told apart by
its name's short id even when two kernels share a short name."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest


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


# Every kind of character outside XML 1.0's Char production, and its neighbours that are allowed.
NOT_XML_CHARS = ["\ufffe", "\uffff", "\x00", "\x01", "\x08", "\x0b", "\x0c", "\x1f", "\ud800", "\udfff", "\udcff"]
XML_CHARS = ["\t", "\ud7ff", "\ue000", "\ufffd", "\U00010000", "\U0001fffe", "\U0010ffff", "\ufdd0", "\x7f", "\x85"]


def _parsed_case(name: str):
    from kbase.comparison.gate import Finding, FindingKind, Verdict
    from kbase.enums import GateStatus
    from kbase.render.junit import junit_xml

    rows = [{"name": name, "short_name": name, "class": "regressed", "delta_pct": 12.0, "amdahl": "worth 1%",
             "diagnosis": f"slower: {name}"}]
    verdict = Verdict(status=GateStatus.FAIL, code=1,
                      failing=[Finding(kind=FindingKind.REGRESSED, name=name, short_name=name)])
    text = junit_xml({"kernels": rows}, verdict)
    return text, ET.fromstring(text.encode("utf-8"))


@pytest.mark.parametrize("ch", NOT_XML_CHARS + XML_CHARS, ids=[f"U+{ord(c):04X}" for c in NOT_XML_CHARS + XML_CHARS])
@pytest.mark.parametrize("where", ["alone", "start", "middle", "end", "repeated"])
def test_junit_is_well_formed_whatever_the_kernel_name_holds(ch, where):
    name = {"alone": ch, "start": ch + "gemm", "middle": "ge" + ch + "mm", "end": "gemm" + ch,
            "repeated": ch * 3 + "gemm" + ch}[where]
    text, suite = _parsed_case(name)
    case = next(suite.iter("testcase"))
    assert case.find("failure") is not None
    if ch in NOT_XML_CHARS:  # shown as a visible escape, never raw
        assert ch not in text and ch not in case.get("name")
        assert f"\\u{ord(ch):04x}" in case.get("name") or f"\\x{ord(ch) & 0xFF:02x}" in case.get("name")
    else:  # characters XML carries are data, kept (C1 and DEL escaped by ``inert`` as everywhere)
        assert ch in case.get("name") or ord(ch) < 0xA0


def test_every_code_point_outside_xml_char_is_escaped():
    """All 2,000-odd code points outside the Char production (C0, surrogates, U+FFFE/U+FFFF) in one name."""
    from kbase.render.safe import xml_attr, xml_text

    bad = [chr(c) for c in [*range(0x20), *range(0xD800, 0xE000), 0xFFFE, 0xFFFF] if chr(c) not in "\t\n\r"]
    name = "k".join(bad)
    ET.fromstring(f"<t a={xml_attr(name)}>{xml_text(name)}</t>".encode("utf-8", "surrogatepass"))
