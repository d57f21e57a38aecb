"""docs/architecture.md names real things: every dotted ``kbase.…`` name it writes in backticks imports (a module)
or is an attribute of one (a function, a class, a registry), so a rename that leaves the page stale fails here."""

from __future__ import annotations

import importlib
import re

from helpers.shared import REPO


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_name_on_the_architecture_page_exists():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    names = set(re.findall(r"`(kbase(?:\.[A-Za-z_][A-Za-z0-9_]*)+)", text))
    assert len(names) >= 25, sorted(names)
    missing = []
    for name in sorted(names):
        try:
            _resolve(name)
        except (ImportError, AttributeError):
            missing.append(name)
    assert not missing, f"docs/architecture.md names what does not exist: {missing}"


def test_the_page_is_linked_and_short():
    assert "(docs/architecture.md)" in (REPO / "README.md").read_text(encoding="utf-8")
    assert len((REPO / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()) <= 150
