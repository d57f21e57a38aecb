"""Issue 12, output that cannot be turned against its reader: hypothesis generates kernel names made of
Rich markup, terminal escapes (CSI, OSC), C0/C1 control characters, bidi overrides, line separators,
Markdown/HTML/XML metacharacters (``|``, backticks, ``<!--``, ``<script>``, ``]]>``, links, mentions) and
puts them in a profile, which goes snapshot -> store -> show / diff / gate, through every output format:
terminal table, Markdown (stdout, step summary, PR comment), JSON (stdout, --output), JUnit XML, the HTML
report and BMF. Each output must parse with its parser, keep the name inert (shown escaped, never acting),
and the JSON round trip must give the names back exactly. Lone surrogates (non-UTF-8 bytes), which no
SQLite export can hold, go through every escaper directly."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from kbase.render.console import SafeConsole
from kbase.render.safe import inert, json_safe, md_text, term_text, xml_attr, xml_chars, xml_text
from kbase.synth.generate import ExportSpec, generate_export
from kbase.synth.names import KernelSpec

from helpers.cli import kb

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

REV1, REV2 = "1" * 40, "2" * 40
PIECES = ["[/bold]", "[red]x[/red]", "[link=http://e]", "\x1b[2J", "\x1b[1A\x1b[K", "\x1b]0;pwn\x07", "\x1b]8;;http://e\x1b\\",
          "\r", "\n", "\t", "\x01", "\x7f", "\x9b", "\u202e", "\u2066", "\u2028", "\ufeff", "|", "`", "``", "<!--",
          "-->", "<script>alert(1)</script>", "<b>", "&amp;", "*", "_", "[x](http://e)", "![i](http://e/i.png)",
          "@user", "#1", "\\", "'", '"', "]]>", "<![CDATA[", "$x$", "{{x}}", "%s", "ü", "核", "\ufffe", "\uffff"]
HOSTILE = st.lists(st.sampled_from(PIECES) | st.text(st.characters(blacklist_categories=("Cs",)), max_size=3),
                   min_size=1, max_size=5).map("".join)
# What must never reach a reader raw (terminal or CI log): C0 except newline, DEL, C1, bidi controls.
RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
PLACEHOLDERS = [("void hostile_0_kernel(float*)", "hostile_0_kernel"),
                ("void hostile_1_kernel(float*)", "hostile_1_kernel")]


@pytest.fixture(scope="module")
def base_export(tmp_path_factory) -> Path:
    ks = [KernelSpec(n, s, 200_000 - 50_000 * i, 2) for i, (n, s) in enumerate(PLACEHOLDERS)]
    ks.append(KernelSpec("plain_gemm(float*)", "plain_gemm", 400_000, 3))
    return generate_export(tmp_path_factory.mktemp("fuzz") / "base.sqlite",
                           ExportSpec(n_gpus=1, iterations=4, seed=3, kernels=ks)).path


def hostile_export(base: Path, out: Path, names: list[str]) -> Path:
    """``base`` with the two placeholder kernels renamed (full and short name) to ``names``."""
    shutil.copy(base, out)
    conn = sqlite3.connect(out)
    for (full, short), name in zip(PLACEHOLDERS, names):
        conn.execute("UPDATE StringIds SET value = ? WHERE value = ?", (f"void {name}(float*)", full))
        conn.execute("UPDATE StringIds SET value = ? WHERE value = ?", (name, short))
    conn.commit()
    conn.close()
    return out


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_comment(self, data):
        self.comments.append(data)


def html_tags(text: str) -> Tags:
    p = Tags()
    p.feed(text)
    p.close()
    return p


def check_terminal(text: str, shorts: list[str]) -> None:
    assert not RAW_CONTROL.search(text), repr(RAW_CONTROL.search(text))
    for s in shorts:
        if len(inert(s)) < 40:
            assert inert(s) in text, (s, text[:3000])


def check_markdown(text: str, n_comments: int = 0) -> None:
    from markdown_it import MarkdownIt

    assert not RAW_CONTROL.search(text)
    html = MarkdownIt("commonmark").enable("table").render(text)
    tags = html_tags(html)
    made = {t for t, _ in tags.tags}
    assert made <= {"h2", "h3", "p", "ul", "li", "strong", "em", "table", "thead", "tbody", "tr", "th", "td",
                    "code", "details", "summary", "br", "hr", "sub", "blockquote"}, made
    assert len(tags.comments) == n_comments, tags.comments
    for table in re.findall(r"<table>(.*?)</table>", html, flags=re.S):  # no row broken by a name
        widths = {len(re.findall(r"<t[hd][ >]", r)) for r in re.findall(r"<tr>(.*?)</tr>", table, flags=re.S)}
        assert len(widths) == 1, widths


def names_of(doc: dict) -> set[str]:
    return {k["name"] for k in doc["kernels"]}


@pytest.mark.slow
@settings(max_examples=8, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=HOSTILE, b=HOSTILE)
@example(a="\U0010f11fr\x02\x00<b>\xaan\U00034c43", b='\n\x1b[2JHr\U00094ddb"J\xa3')  # NUL: shown as U+FFFD
@example(a="\u202eevil\x7f", b="\x9b[31m\u2066")  # a bidi override, DEL, C1: escaped in JSON too
def test_hostile_names_are_inert_in_every_format(base_export, tmp_path_factory, monkeypatch, a, b):
    d = tmp_path_factory.mktemp("ex")
    names = [f"k0{a}", f"k1{b}"]
    prof = hostile_export(base_export, d / "h.sqlite", names)
    db = f"sqlite:///{d / 'k.db'}"
    # names are data, kept as written, except NUL and lone surrogates, which no output can carry: the
    # reader shows them as U+FFFD (and says so in a note)
    from kbase.readers.integrity import clean_text

    full = {clean_text(f"void {n}(float*)") for n in names}

    r = kb("snapshot", base_export, "--no-git", "--rev", REV1, "--db", db, "--format", "json")
    assert r.rc == 0, r
    r = kb("snapshot", prof, "--no-git", "--rev", REV2, "--db", db, "--format", "json")
    assert r.rc == 0, r
    assert full <= names_of(json.loads(r.stdout)), "snapshot JSON lost or changed a name"
    shown = kb("show", "@2", "--db", db, "--format", "json", "--limit", "0")
    assert shown.rc == 0 and full <= names_of(json.loads(shown.stdout)), "stored names changed"
    shorts = [k["short_name"] for k in json.loads(shown.stdout)["kernels"] if k["name"] in full]

    for cmd in (("show", "@2", "--db", db), ("top", prof)):
        r = kb(*cmd, "--format", "table", "--limit", "0")
        assert r.rc == 0, r
        check_terminal(r.stdout + r.stderr, shorts)
        r = kb(*cmd, "--format", "md", "--limit", "0")
        assert r.rc == 0, r
        check_markdown(r.stdout)

    summary = d / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    r = kb("gate", "@1", "@2", "--db", db, "--junit", d / "j.xml", "--output", d / "o.json", "--format", "table",
           "--all")
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    assert r.rc in (0, 1), r
    check_terminal(r.stdout + r.stderr, [])
    check_markdown(summary.read_text(encoding="utf-8"))
    doc = json.loads((d / "o.json").read_text(encoding="utf-8"))
    assert full <= names_of(doc)
    assert not RAW_CONTROL.search((d / "o.json").read_text(encoding="utf-8").replace("\n", ""))
    suite = ET.fromstring((d / "j.xml").read_bytes())
    cases = {c.get("name") for c in suite.iter("testcase")}
    assert {xml_chars(n) for n in full} <= cases, cases
    for fmt in ("json", "md"):
        r = kb("diff", "@1", "@2", "--db", db, "--format", fmt, "--all")
        assert r.rc == 0, r
        if fmt == "json":
            assert full <= names_of(json.loads(r.stdout))
            assert not RAW_CONTROL.search(r.stdout.replace("\n", ""))
        else:
            check_markdown(r.stdout)
    for name in sorted(full):  # one kernel's history (its JSON has its own one-baseline-a-line layout)
        r = kb("history", name, "--db", db, "--format", "json")
        assert r.rc == 0, r
        assert json.loads(r.stdout)["kernel"]["name"] == name
        assert not RAW_CONTROL.search(r.stdout.replace("\n", ""))

    from kbase.comparison.gate import decide  # noqa: F401 - the comment renders the same verdict dict
    from kbase.render.comment import comment_markdown
    from kbase.render.interop import bmf_from_diff, dumps_strict

    check_markdown(comment_markdown(doc, doc.get("verdict")), n_comments=1)
    bmf = dumps_strict(bmf_from_diff(doc))
    assert not RAW_CONTROL.search(bmf.replace("\n", ""))
    json.loads(bmf)

    # snapshot renders its table after storing: hostile names never make it crash half-way (exit 3 with a
    # baseline stored); stored first, then shown
    for fmt in ("table", "md"):
        r = kb("snapshot", prof, "--no-git", "--rev", "3" * 40, "--db", db, "--format", fmt, "--force")
        assert r.rc == 0, r
        check_terminal(r.stdout + r.stderr, []) if fmt == "table" else check_markdown(r.stdout)

    import kbase
    from kbase.render.report.site import build_report

    data = kbase.report_data(kbase.Settings.load(db=db, repo=d))
    out = d / "report"
    build_report(data, out)
    for page in out.glob("*.html"):
        text = page.read_text(encoding="utf-8")
        tags = html_tags(text)
        scripts = [t for t in tags.tags if t[0] == "script"]
        assert all(s[1].get("type") == "application/json" or "src" in s[1] or not s[1] for s in scripts)
        assert "<script>alert" not in text and "<b>" not in text
        assert not any("k0" in c or "k1" in c for c in tags.comments)


# Lone surrogates as Python makes them from bytes that are not UTF-8 (surrogateescape: U+DC80..U+DCFF).
SURROGATE_NAMES = st.lists(st.sampled_from(PIECES) | st.sampled_from(["\udcff", "\udc80", "\udcc3\udca9"]),
                           min_size=1, max_size=6).map("".join)


@settings(max_examples=200, deadline=None)
@given(name=SURROGATE_NAMES)
def test_every_escaper_handles_surrogates_and_controls(name):
    import io

    from kbase import jsonable

    for out in (inert(name), term_text(name), md_text(name), xml_text(name)):
        assert not RAW_CONTROL.search(out) and not re.search("[\ud800-\udfff]", out)
        out.encode("utf-8")
        assert "\n" not in out
    ET.fromstring(f"<t a={xml_attr(name)}>{xml_text(name)}</t>".encode())
    doc = jsonable.dumps({"name": name})
    assert json.loads(doc)["name"] == name and not RAW_CONTROL.search(doc.replace("\n", ""))
    assert json.loads(json_safe(json.dumps({"n": name}, ensure_ascii=False)))["n"] == name
    buf = io.StringIO()
    SafeConsole(file=buf, width=200, force_terminal=True).print(name, "x[/bold]")
    assert "\x1b" not in re.sub("\x1b\\[[0-9;]*m", "", buf.getvalue())  # only Rich's own colour codes
    plain = io.StringIO()
    SafeConsole(file=plain, width=200).print(name)
    assert not RAW_CONTROL.search(plain.getvalue()) and inert(name) in plain.getvalue().replace("\n", "")
