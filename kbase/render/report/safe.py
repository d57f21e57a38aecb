"""Make untrusted text inert in the report: HTML text, plotly labels, and JSON inside a script element.

Kernel names come from profiles (any byte a compiler or a user put in a symbol or an NVTX range),
commit subjects from git. Three contexts, three escapers:

- ``html_text``: element text and attribute values (``&<>"'`` as entities, control characters made
  visible as ``\\xNN``).
- ``plot_text``: strings plotly draws. Plotly reads a small HTML subset (``<b>``, ``<br>``, ``<a>``)
  and entities in labels and hover text, and treats a string wrapped in ``$...$`` as LaTeX: ``&<>$``
  become entities, so a name shows as written and never as markup.
- ``script_json``: JSON for ``<script type="application/json">``. ``<``, ``>``, ``&`` and U+2028/2029
  are written as ``\\uXXXX`` escapes, so ``</script>`` or ``<!--`` in a name cannot end or alter the
  element; strict JSON (``allow_nan=False``) so ``JSON.parse`` never meets ``NaN``.
"""

from __future__ import annotations

import json
import math
import re

from kbase.display import clip, html_text  # noqa: F401 - re-exported: the report's escapers, one definition each

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ufeff]")
_JSON_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_UNSAFE_RE = re.compile("[<>&\u2028\u2029]")


def visible(text: str) -> str:
    """``text`` with control characters (and tab/newline), bidi controls and lone surrogates shown as
    ``\\xNN`` / ``\\uNNNN`` escapes (``kbase.render.safe.inert``, the one definition)."""
    from kbase.render.safe import inert

    return inert(text)


def plot_text(text: object, width: int = 0) -> str:
    """Escape for a plotly label or hover text; ``width`` > 0 wraps long text into lines of that many
    characters (plotly never wraps a C++ template name by itself)."""
    s = visible(str(text))
    if width > 0 and len(s) > width:
        parts = [s[i : i + width] for i in range(0, len(s), width)]
        return "<br>".join(_entities(p) for p in parts)
    return _entities(s)


def _entities(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("$", "&#36;")


def strict(value):
    """``value`` with every non-finite float replaced by None (strict JSON has no NaN or Infinity)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalar
        return strict(value.item())
    return value


def script_json(value) -> str:
    """Strict JSON that is safe as the text of a ``<script type="application/json">`` element."""
    text = json.dumps(strict(value), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return _JSON_UNSAFE_RE.sub(lambda m: _JSON_UNSAFE[m.group()], text)
