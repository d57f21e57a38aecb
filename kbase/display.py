"""Names are data, wherever they are shown: the escapers every layer may use (``inert``, ``html_text``; the
output formats' other escapers build on them in ``render.safe``), and the small HTML table kbase's objects show
in a notebook (``html_table``), and how a result shows itself there (``Shown``, ``show_by_name``). A leaf module:
the objects that show themselves live in every layer, their formatters above them all (``render.notebook``).
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
# C0, DEL, C1; bidi marks, embeddings, overrides and isolates; line/paragraph separators; BOM; surrogates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029\ufeff"
                     "\ud800-\udfff]")


def _escape_char(m: re.Match[str]) -> str:
    ch = m.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape): show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: object) -> str:
    """``text`` on one line with every character that could act on a terminal or reorder text escaped."""
    return _UNSAFE.sub(_escape_char, str(text))


def html_text(text: object) -> str:
    """Escape for HTML element text or a quoted attribute value."""
    return html.escape(inert(text), quote=True)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis."""
    return text if len(text) <= limit else text[: max(limit - 1, 1)] + "…"


_OPENERS, _CLOSERS = "<([{", ">)]}"


def clip_balanced(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters with an ellipsis, and every bracket the cut leaves open
    closed after it (``vectorized_elementwise_kernel<4, FillF…>``); a trailing ``#id`` (`` #a1b2c3``, what
    tables show where names collide) is kept whole."""
    if len(text) <= limit:
        return text
    head, sep, tail = text.rpartition(" #")
    suffix = sep + tail if sep and len(tail) <= 8 and " " not in tail and len(sep + tail) + 2 <= limit else ""
    body = head if suffix else text
    room = limit - len(suffix)
    for cut in range(min(len(body), max(room - 1, 1)), 0, -1):
        part = body[:cut].rstrip()
        stack: list[str] = []
        for ch in part:
            if ch in _OPENERS:
                stack.append(_CLOSERS[_OPENERS.index(ch)])
            elif ch in _CLOSERS and stack and stack[-1] == ch:
                stack.pop()
        shown = part + "…" + "".join(reversed(stack))
        if len(shown) <= room:
            return shown + suffix
    return clip(text, limit)


def html_table(headers: Sequence[str], rows: Iterable[Sequence[object]], *, caption: str = "",
               notes: Sequence[str] = (), numeric: Iterable[int] = ()) -> str:
    """A small HTML table for a notebook (``_repr_html_``): every header, cell, caption and note escaped
    (``html_text``), so a kernel name shows as written and never acts as markup. ``numeric``: the indexes of
    right-aligned columns."""
    right = set(numeric)

    def cell(tag: str, i: int, value: object) -> str:
        style = ' style="text-align:right"' if i in right else ' style="text-align:left"'
        return f"<{tag}{style}>{html_text(value)}</{tag}>"

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(r)) + "</tr>" for r in rows)
    top = f"<p><b>{html_text(caption)}</b></p>" if caption else ""
    tail = "".join(f"<p><small>{html_text(n)}</small></p>" for n in notes)
    return (f'<div class="kbase-repr">{top}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
            f"{tail}</div>")


# ------------------------------------------------------------------------------------------ notebook display

ShowLine = Callable[[Any], str]
ShowHtml = Callable[[Any], str]
_SHOWN: dict[str, tuple[ShowLine, ShowHtml]] = {}


def show_by_name(dotted: str, line: ShowLine, html_: ShowHtml) -> None:
    """Register how instances of the class ``dotted`` (``module.QualName``) show themselves: a one-line ``repr``
    and a notebook's HTML. By name, as IPython's ``for_type_by_name``: the formatters sit above every object they
    show (``render.notebook``), and registering them imports no object's module, so no import points up."""
    _SHOWN[dotted] = (line, html_)


def registered_names() -> list[str]:
    """The classes a formatter is registered for (``module.QualName``)."""
    return sorted(_SHOWN)


def _formatters(obj: object) -> tuple[ShowLine, ShowHtml] | None:
    for cls in type(obj).__mro__:
        found = _SHOWN.get(f"{cls.__module__}.{cls.__qualname__}")
        if found is not None:
            return found
    return None


class Shown:
    """A result that shows itself with the formatters registered for its class (``show_by_name``:
    ``render.notebook`` registers them all, and ``kbase.api`` imports it, so every result the API returns shows
    its line and table). With none registered: Python's default ``repr``, and no HTML."""

    __slots__ = ()

    def __repr__(self) -> str:
        found = _formatters(self)
        return found[0](self) if found is not None else object.__repr__(self)

    def _repr_html_(self) -> str | None:
        found = _formatters(self)
        return found[1](self) if found is not None else None
