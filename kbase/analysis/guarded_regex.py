"""A regular expression guarded by its needles: substrings one of which every match contains.

Classifying a kernel name searches some thirty patterns, and most of them cannot match most names. A
``needle in text`` test runs in C without the regex engine's per-position work, so a name that holds none of
a pattern's needles is ruled out at a fraction of a search's cost, and a pattern no name gets past its needles
to is never compiled. The needles must be implied by the pattern (``tests/analysis/test_classify_guarded.py``
proves that of every guarded pattern from its parse tree); then the guard never changes an answer.
"""

from __future__ import annotations

import re


class GuardedRegex:
    """``re.compile(source, flags)``, searched only in a text holding one of ``needles`` (``None``: unguarded).
    With ``re.IGNORECASE`` the needles are lower case and guard ASCII texts only: there a case-insensitive
    match of a needle is a plain match in ``text.lower()``; Unicode case folding has more pairs (``ſ`` ~ ``s``,
    ``K`` (Kelvin) ~ ``k``), so a non-ASCII text goes straight to the regex."""

    __slots__ = ("pattern", "flags", "needles", "_fold", "_compiled")

    def __init__(self, pattern: str, needles: tuple[str, ...] | None, flags: int = 0) -> None:
        self._fold = bool(flags & re.IGNORECASE)
        if needles is not None:
            assert needles and all(needles), pattern  # an empty needle would guard nothing
            assert not self._fold or all(n == n.lower() and n.isascii() for n in needles), pattern
        self.pattern = pattern
        self.flags = flags
        self.needles = needles
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def search(self, text: str) -> re.Match[str] | None:
        """``compiled.search(text)``, or None at once when ``text`` holds none of the needles."""
        needles = self.needles
        if needles is not None and not (self._fold and not text.isascii()):
            probe = text.lower() if self._fold else text
            for needle in needles:
                if needle in probe:
                    break
            else:
                return None
        return self.compiled.search(text)

    def __repr__(self) -> str:
        return f"GuardedRegex({self.pattern!r}, {self.needles!r})"
