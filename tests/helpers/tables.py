"""Reading tables back from kbase's outputs: the unit a column states its times in, a Markdown table's cells."""

from __future__ import annotations

import re

from kbase.units import ABSENT

TIME = re.compile(r"^[+-]?<?[\d.,]+(?:–[\d.,]+)? (s|ms|µs|ns)$")


def units(cells: list[str]) -> set[str]:
    """The units a column's cells are written in (absent cells say nothing); every other cell must be a time."""
    found = set()
    for c in cells:
        c = c.strip().replace("\\", "").replace("&lt;", "<")  # Markdown writes a cell's "<" as an entity
        if c in (ABSENT, "-", ""):
            continue
        m = TIME.match(c)
        assert m, f"not a time: {c!r}"
        found.add(m.group(1))
    return found


def md_table(text: str, first_header: str) -> tuple[list[str], list[list[str]]]:
    """The Markdown table whose header row starts with ``first_header``: (headers, rows of cells)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header}"))
    split = re.compile(r"(?<!\\)\|")
    head = [h.strip() for h in split.split(lines[start])[1:-1]]
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in split.split(line)[1:-1]])
    return head, rows


def column(head: list[str], rows: list[list[str]], name: str) -> list[str]:
    i = head.index(name)
    return [r[i] for r in rows]
