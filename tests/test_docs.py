"""README.md is the front door and docs/ the reference: README stays short and links every page, every
relative link resolves, every test the guarantee table names exists, and neither holds development history
(that is CHANGELOG.md's). Example outputs and the CLI reference are checked by tests/cli/test_readme_examples.py
and tests/cli/test_cli_docs.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from helpers.shared import REPO

README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS, REPO / "CHANGELOG.md"]
LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
# Pages written on other branches at the same time, linked from README before they land here: each entry goes
# when its page is merged (the link check then covers it like any other).
PENDING: set[str] = set()


def test_readme_is_a_front_door():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: reference belongs in docs/"
    text = "\n".join(lines)
    assert "pip install -e . && kbase demo" in text
    assert 'python -m pytest -n 2\n' in text  # the command .ci/run calls
    assert 'python -m pytest -n 2 -m "not slow"' in text


def test_ci_runs_the_test_command_of_the_readme():
    run = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert run.rstrip().splitlines()[-1] == "python -m pytest -n 2"


def test_every_docs_page_is_linked_from_the_readme():
    links = {m["target"].split("#")[0] for m in LINK.finditer(README.read_text(encoding="utf-8"))}
    missing = [str(p.relative_to(REPO)) for p in DOCS if str(p.relative_to(REPO)) not in links]
    assert not missing, f"README.md does not link {missing}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_resolve(page):
    text = page.read_text(encoding="utf-8")
    for m in LINK.finditer(text):
        target = m["target"]
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (page.parent / target.split("#")[0]).resolve()
        rel = path.relative_to(REPO.resolve()) if path.is_relative_to(REPO.resolve()) else path
        if str(rel) in PENDING:
            continue
        assert path.exists(), f"{page.name}: broken link {target}"
        anchor = target.split("#")[1] if "#" in target else None
        if anchor and path.suffix == ".md":
            assert anchor in _anchors(path), f"{page.name}: {target}: no such heading"


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    heads = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_the_guarantee_table_names_tests_that_exist():
    text = (REPO / "docs" / "failure-behaviour.md").read_text(encoding="utf-8")
    named = 0
    for row in (line for line in text.splitlines() if line.startswith("| ") and "`" in line):
        current: Path | None = None
        for ref in re.findall(r"`([^`]+)`", row.rsplit("|", 2)[-2]):
            if ".py" not in ref and not ref.startswith("::"):
                continue  # (a tool named beside the tests)
            file, _, test = ref.partition("::")
            if file:
                found = sorted(REPO.glob(f"tests/**/{Path(file).name}"))
                assert found, f"docs/failure-behaviour.md names {file}: no such test file"
                current = found[0]
            if test:
                assert current is not None, ref
                names = {n.name for n in ast.walk(ast.parse(current.read_text(encoding="utf-8")))
                         if isinstance(n, ast.FunctionDef)}
                assert test in names, f"docs/failure-behaviour.md names {current.name}::{test}: no such test"
                named += 1
    assert named >= 20


@pytest.mark.parametrize("page", [README, *DOCS], ids=[p.name for p in [README, *DOCS]])
def test_no_development_history(page):
    """How the code got here (stops, issue numbers, old commits, "was X, now Y") is CHANGELOG.md's."""
    text = page.read_text(encoding="utf-8")
    for pattern in (r"\bstops?\b \d", r"\bthis stop\b", r"\blast stop\b", r"\bissue \d+", r"\bturn \d+",
                    r"\b[0-9a-f]{7}\b(?=\))"):
        found = re.search(pattern, text, re.I)
        assert not found, f"{page.name}: {found.group(0)!r} (development history goes to CHANGELOG.md)"
