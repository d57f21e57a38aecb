"""Names are data: one escaper per output format, so nothing read from a profile (kernel names, NVTX
ranges, paths, commit subjects) can act on the reader of kbase's output.

- ``inert``: control characters (C0, DEL, C1, tab/newline/CR), bidirectional overrides and isolates,
  line/paragraph separators, BOM and lone surrogates (non-UTF-8 bytes of a path) become visible ``\\xNN`` /
  ``\\uNNNN`` escapes: one line, no terminal escape sequence, no text reordering.
- ``term_text``: ``inert`` plus Rich markup escaped (``x[/bold]`` prints as written). ``SafeConsole``
  applies both to every string it renders (table cells, titles, lines), so a caller cannot forget.
- ``md_text``: GitHub Markdown inline text, also in a table cell (no table break, code span, emphasis,
  link, HTML tag, comment, mention or line break can come out of a name); used by ``render.comment``.
- ``html_text``: HTML element text or quoted attribute value (``render.report.safe.visible`` is ``inert``).
- ``xml_text`` / ``xml_attr``: well-formed XML 1.0: ``inert``, then every character outside XML 1.0's ``Char``
  production (U+FFFE, U+FFFF; whatever ``inert`` lets through) shown as an escape too.
- ``json_safe``: JSON text with those characters as ``\\uXXXX`` (``kbase.jsonable.dumps`` applies it).
"""

from __future__ import annotations

import functools
import re
from typing import Any

# html_text, inert: re-exported (leaf definitions, so every layer shows names alike)
from kbase.display import _escape_char, html_text, inert
from kbase.jsonable import json_safe  # re-exported: it lives with the JSON writer, apart from rich

__all__ = ["csv_text", "html_text", "inert", "json_safe", "md_text", "term_text", "xml_attr", "xml_chars", "xml_text"]

_MD_ESCAPES = str.maketrans({"\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]",
                             "|": "\\|", "~": "\\~", "#": "\\#", "!": "\\!", "<": "&lt;", ">": "&gt;",
                             "&": "&amp;", "@": "@\u200b"})


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(value: Any) -> Any:
    """A CSV cell that a spreadsheet cannot run: text starting like a formula (``=``, ``+``, ``-``, ``@``,
    tab, CR) gets a leading ``'`` (OWASP's advice); other values pass through unchanged."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


def md_text(text: object, limit: int = 0) -> str:
    """``text`` as inert GitHub Markdown inline text (also inside a table cell); cut to ``limit``."""
    s = inert(text)
    if limit and len(s) > limit:
        s = s[: limit - 1] + "…"
    return s.translate(_MD_ESCAPES)


def term_text(text: object) -> str:
    """``inert`` text, with Rich markup escaped, for a Rich table cell or ``console.print``."""
    from rich.markup import escape

    return escape(inert(text))


@functools.cache
def _not_xml_char() -> re.Pattern[str]:
    """Anything but XML 1.0's Char production: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] |
    [#x10000-#x10FFFF] (``inert`` has escaped the C0 controls, tab and newline included, and the surrogates
    already). Compiled on first use: the negated ranges take ``re`` ~7 ms, and only JUnit writes XML."""
    return re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_chars(text: object) -> str:
    """``inert`` text holding only characters XML 1.0 allows (the rest as ``\\uNNNN``)."""
    return _not_xml_char().sub(_escape_char, inert(text))


def xml_text(text: object) -> str:
    """Element text of well-formed XML 1.0."""
    from xml.sax.saxutils import escape  # here: xml.sax pulls in urllib (~8 ms); only JUnit writes XML

    return escape(xml_chars(text))


def xml_attr(text: object) -> str:
    """A quoted XML attribute value (quotes included)."""
    from xml.sax.saxutils import quoteattr

    return quoteattr(xml_chars(text))
