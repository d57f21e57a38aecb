"""The terminal console every screen output goes through (rich), apart from ``render.safe`` so that
machine-readable outputs never load rich."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from kbase.display import inert


class SafeConsole(Console):
    """A Rich console that never parses markup in the strings it is given and shows every control
    character, escape sequence and bidi override as a visible escape (tables included). Styles passed
    as arguments still apply; a ``rich.text.Text`` made by the caller is the caller's business."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["markup"] = False
        kwargs.setdefault("emoji", False)
        kwargs.setdefault("highlight", False)
        super().__init__(*args, **kwargs)

    def render_str(self, text: str, **kwargs: Any) -> Any:
        kwargs["markup"] = False
        kwargs["emoji"] = False
        return super().render_str(inert(text), **kwargs)
