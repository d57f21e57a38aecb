"""Finding a kernel by what a person types: the one matcher behind every command that asks for a name.

A query is tried, in order, as: the exact full name; a short id (``#a1b2c3``, as tables show where
short names collide, also as the table's whole ``name #a1b2c3`` cell); the short name (exact, then
ignoring case); the family (template arguments stripped; also its trailing ``ns::name`` part); a
substring of the full name (ignoring case); a regular expression (``/.../``, or any query with regex
characters). The first rule that matches anything decides. No match raises ``KernelNotFound`` with the
closest names ("did you mean"); several matches raise ``AmbiguousKernel`` listing the candidates.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from kbase.analysis.names import display_names, family_key, short_id, short_name
from kbase.errors import InputError

_ID = re.compile(r"(?:^|\s)#([0-9a-fA-F]{4,40})$")
_REGEX_CHARS = re.compile(r"[\\^$*+?{}\[\]|]")
SHOWN_CANDIDATES = 10


class KernelNotFound(InputError):
    """No stored kernel matches the query."""


class AmbiguousKernel(InputError):
    """Several stored kernels match the query."""

    def __init__(self, message: str, *, candidates: list[str], **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.candidates = candidates


@dataclass(frozen=True)
class Kernel:
    name: str  # the full demangled name
    short: str  # the table's short name

    @property
    def id(self) -> str:
        return short_id(self.name)

    def label(self) -> str:
        return f"{self.short} {self.id}"


def _kernels(names: Sequence[str], shorts: Sequence[str] | None) -> list[Kernel]:
    seen: dict[str, Kernel] = {}
    for i, n in enumerate(names):
        if n not in seen:
            seen[n] = Kernel(n, shorts[i] if shorts is not None and shorts[i] else short_name(n))
    return list(seen.values())


def _regex(query: str) -> re.Pattern[str] | None:
    body = query[1:-1] if len(query) >= 2 and query.startswith("/") and query.endswith("/") else query
    if body is query and not _REGEX_CHARS.search(query):
        return None
    try:
        return re.compile(body)
    except re.error as exc:
        if body is not query:
            raise InputError(f"bad regular expression ({exc})", field="kernel", value=query) from None
        return None


def matches(query: str, names: Sequence[str], shorts: Sequence[str] | None = None) -> list[Kernel]:
    """The kernels the first matching rule finds (see the module's docstring); empty when none does."""
    kernels = _kernels(names, shorts)
    q = query.strip()
    if not q:
        return []
    rules = []
    rules.append(lambda k: k.name == query)
    m = _ID.search(q)
    if m:
        hexid = m.group(1).lower()
        rules.append(lambda k: k.id[1:].startswith(hexid) or k.id[1:] == hexid[:6])
    fold = q.casefold()
    rules.append(lambda k: k.short == q)
    rules.append(lambda k: k.short.casefold() == fold)
    rules.append(lambda k: family_key(k.name) == q or family_key(k.name).endswith("::" + q))
    rules.append(lambda k: fold in k.name.casefold())
    rx = _regex(q)
    if rx is not None:
        rules.append(lambda k: rx.search(k.name) is not None)
    for rule in rules:
        found = [k for k in kernels if rule(k)]
        if found:
            return found
    return []


def find_kernel(query: str, names: Sequence[str], shorts: Sequence[str] | None = None) -> Kernel:
    """The one kernel ``query`` names, or a one-line error: not found (with suggestions) or ambiguous
    (with the candidates and their ids)."""
    found = matches(query, names, shorts)
    if len(found) == 1:
        return found[0]
    if not found:
        kernels = _kernels(names, shorts)
        if not kernels:
            raise KernelNotFound("no kernels stored (snapshot a profile first)", field="kernel", value=query)
        close = suggestions(query, kernels)
        hint = f"; did you mean: {', '.join(close)}" if close else ""
        raise KernelNotFound(f"no stored kernel matches{hint}", field="kernel", value=query)
    labels = display_names([k.name for k in found], [k.short for k in found])
    shown = ", ".join(_cut(lab, k) for lab, k in zip(labels[:SHOWN_CANDIDATES], found))
    more = f", … ({len(found)} in all)" if len(found) > SHOWN_CANDIDATES else ""
    raise AmbiguousKernel(f"{len(found)} kernels match: {shown}{more} (give an #id or the full name)",
                          field="kernel", value=query, candidates=[k.name for k in found])


def _cut(label: str, k: Kernel, width: int = 72) -> str:
    """A candidate's label (with its #id) in at most ``width`` characters, the id kept."""
    if not label.endswith(k.id):
        label = f"{label} {k.id}"
    if len(label) <= width:
        return label
    keep = width - len(k.id) - 2
    return label[:keep] + "… " + k.id


def suggestions(query: str, kernels: Sequence[Kernel], n: int = 3) -> list[str]:
    """Close short (or full) names, labelled with their ids where a short name is shared."""
    shorts = sorted({k.short for k in kernels})
    close = difflib.get_close_matches(query, shorts, n=n, cutoff=0.5)
    if not close:
        full = difflib.get_close_matches(query, [k.name for k in kernels], n=n, cutoff=0.5)
        close = [short_name(f) for f in full]
    return close


def is_pattern(text: str) -> bool:
    """A glob (``*?[``) or ``/regex/`` (as the gate's ``ignore`` and acceptances take), not a name."""
    return (len(text) >= 2 and text.startswith("/") and text.endswith("/")) or any(c in text for c in "*?[")


def exact_pattern(name: str) -> str:
    """A gate pattern matching exactly ``name``: a glob with ``*?[`` escaped (a regex if the name
    itself looks like ``/…/``)."""
    if name.startswith("/") and name.endswith("/"):
        return "/^" + re.escape(name) + "$/"
    return re.sub(r"([*?\[])", r"[\1]", name)
