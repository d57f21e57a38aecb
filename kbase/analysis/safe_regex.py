"""Kernel-name ``/regex/`` patterns matched in time linear in the name, whatever the pattern: an acceptance or a
policy pattern comes from a config file, the command line or an imported export file, and Python's backtracking
``re`` takes exponential (``(a+)+b``) or high-polynomial (``.*a.*a.*b``: 16 s on a 500-character name) time on
some. ``SafeRegex`` takes the pattern apart with Python's own parser (so it means what ``re`` means), builds a
Thompson automaton and runs it as a DFA built as it goes: one dictionary step per character once warm.

Supported: literals, ``.``, classes (ranges, ``\\d \\w \\s`` and their negations), groups, alternation, every
quantifier (greedy or lazy: a yes/no search does not care), ``^ $ \\A \\Z``. Refused (``UnsafePattern``, the
message says which): back-references, look-arounds, ``\\b``, atomic groups and possessive quantifiers, inline flags
and patterns that expand past ``MAX_STATES`` states (``x{1000}{1000}``): none has a linear-time reading.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

MAX_STATES = 20_000  # automaton states: a pattern expanding past this is refused
_MAX_CACHE = 50_000  # DFA transitions kept per pattern before starting over (memory stays bounded)


class UnsafePattern(ValueError):
    """A regex this engine cannot match in linear time (the message says what in it)."""


_CHAR, _SPLIT, _BEGIN, _END, _END_STRING, _MATCH, _EPS = range(7)


def _char_test(op: Any, av: Any) -> Callable[[str], bool]:
    from re import _constants as c  # type: ignore[attr-defined]

    if op is c.LITERAL:
        ch = chr(av)
        return lambda x: x == ch
    if op is c.NOT_LITERAL:
        ch = chr(av)
        return lambda x: x != ch
    if op is c.ANY:
        return lambda x: x != "\n"
    if op is c.IN:
        negate = bool(av) and av[0][0] is c.NEGATE
        tests = [_set_item(o, a) for o, a in (av[1:] if negate else av)]
        if negate:
            return lambda x: not any(t(x) for t in tests)
        return lambda x: any(t(x) for t in tests)
    raise UnsafePattern(f"unsupported element {op}")


def _set_item(op: Any, av: Any) -> Callable[[str], bool]:
    from re import _constants as c  # type: ignore[attr-defined]

    if op is c.LITERAL:
        ch = chr(av)
        return lambda x: x == ch
    if op is c.RANGE:
        lo, hi = chr(av[0]), chr(av[1])
        return lambda x: lo <= x <= hi
    if op is c.CATEGORY:
        return _category(av)
    raise UnsafePattern(f"unsupported class element {op}")


def _category(cat: Any) -> Callable[[str], bool]:
    from re import _constants as c  # type: ignore[attr-defined]

    tests: dict[Any, Callable[[str], bool]] = {
        c.CATEGORY_DIGIT: str.isdecimal, c.CATEGORY_SPACE: str.isspace,
        c.CATEGORY_WORD: lambda x: x.isalnum() or x == "_"}
    negated = {c.CATEGORY_NOT_DIGIT: c.CATEGORY_DIGIT, c.CATEGORY_NOT_SPACE: c.CATEGORY_SPACE,
               c.CATEGORY_NOT_WORD: c.CATEGORY_WORD}
    if cat in tests:
        return tests[cat]
    if cat in negated:
        t = tests[negated[cat]]
        return lambda x: not t(x)
    raise UnsafePattern(f"unsupported category {cat}")


class _Builder:
    """Thompson construction: each state is [kind, test or None, out, out2]."""

    def __init__(self) -> None:
        self.states: list[list[Any]] = []

    def state(self, kind: int, test: Any = None) -> int:
        if len(self.states) >= MAX_STATES:
            raise UnsafePattern(f"expands to more than {MAX_STATES:,} states")
        self.states.append([kind, test, None, None])
        return len(self.states) - 1

    def patch(self, holes: list[tuple[int, int]], to: int) -> None:
        for s, slot in holes:
            self.states[s][slot] = to

    def sequence(self, items: list[tuple[Any, Any]]) -> tuple[int, list[tuple[int, int]]]:
        """A fragment (start, dangling exits) of a parsed sequence."""
        start = self.state(_EPS)
        holes = [(start, 2)]
        for op, av in items:
            s, out = self.node(op, av)
            self.patch(holes, s)
            holes = out
        return start, holes

    def node(self, op: Any, av: Any) -> tuple[int, list[tuple[int, int]]]:
        from re import _constants as c  # type: ignore[attr-defined]

        if op in (c.LITERAL, c.NOT_LITERAL, c.ANY, c.IN):
            s = self.state(_CHAR, _char_test(op, av))
            return s, [(s, 2)]
        if op is c.SUBPATTERN:
            _group, add, remove, items = av
            if add or remove:
                raise UnsafePattern("inline flags are not supported")
            return self.sequence(items)
        if op is c.BRANCH:  # a chain of forks: fork i reads alternative i, or goes on to fork i + 1
            alts = av[1]
            holes: list[tuple[int, int]] = []
            first, prev = -1, -1
            for k, alt in enumerate(alts):
                s, out = self.sequence(alt)
                holes += out
                entry = s
                if k < len(alts) - 1:
                    entry = self.state(_SPLIT)
                    self.states[entry][2] = s
                if prev < 0:
                    first = entry
                else:
                    self.states[prev][3] = entry
                prev = entry
            return first, holes
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            return self.repeat(*av)
        if op is c.AT:
            kinds = {c.AT_BEGINNING: _BEGIN, c.AT_BEGINNING_STRING: _BEGIN, c.AT_END: _END,
                     c.AT_END_STRING: _END_STRING}
            if av not in kinds:
                raise UnsafePattern(f"{av} (\\b, \\B) is not supported")
            s = self.state(kinds[av])
            return s, [(s, 2)]
        if op in (c.GROUPREF, c.GROUPREF_EXISTS):
            raise UnsafePattern("back-references have no linear-time match")
        if op in (c.ASSERT, c.ASSERT_NOT):
            raise UnsafePattern("look-arounds are not supported")
        raise UnsafePattern(f"{op} is not supported (atomic groups, possessive quantifiers)")

    def repeat(self, lo: int, hi: int, items: list) -> tuple[int, list[tuple[int, int]]]:
        from re import _constants as c  # type: ignore[attr-defined]

        start = self.state(_EPS)
        holes = [(start, 2)]
        for _ in range(lo):
            s, out = self.sequence(items)
            self.patch(holes, s)
            holes = out
        if hi == c.MAXREPEAT:
            loop = self.state(_SPLIT)  # out: the body again, out2: leave
            self.patch(holes, loop)
            s, out = self.sequence(items)
            self.states[loop][2] = s
            self.patch(out, loop)
            return start, [(loop, 3)]
        leave: list[tuple[int, int]] = []
        for _ in range(hi - lo):
            fork = self.state(_SPLIT)
            self.patch(holes, fork)
            s, out = self.sequence(items)
            self.states[fork][2] = s
            leave.append((fork, 3))
            holes = out
        return start, holes + leave


class SafeRegex:
    """A ``/regex/`` pattern's search (``re.search(pattern, text) is not None``) in linear time."""

    def __init__(self, pattern: str) -> None:
        from re import _parser  # type: ignore[attr-defined]

        try:
            parsed = _parser.parse(pattern, 0)
        except (re.error, RecursionError, OverflowError) as exc:
            raise UnsafePattern(f"not a regex ({exc})") from None
        if parsed.state.flags & ~int(re.UNICODE):  # (?i) and the like, at the start of the pattern
            raise UnsafePattern("inline flags are not supported")
        b = _Builder()
        start, holes = b.sequence(list(parsed.data))
        b.patch(holes, b.state(_MATCH))
        self.states = b.states
        self.start = start
        self._closures: dict[tuple[frozenset[int], int], tuple[frozenset[int], bool]] = {}
        self._steps: dict[tuple[frozenset[int], str], frozenset[int]] = {}

    def _closure(self, seeds: frozenset[int], where: int) -> tuple[frozenset[int], bool]:
        """The states reachable without reading (``where``: bit 1 at the start, bit 2 at the end, bit 4 before a
        final newline), and whether the match state is among them."""
        key = (seeds, where)
        hit = self._closures.get(key)
        if hit is not None:
            return hit
        seen: set[int] = set()
        stack = list(seeds)
        out, matched = [], False
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            kind, _, nxt, alt = self.states[s]
            if kind == _CHAR:
                out.append(s)
            elif kind == _MATCH:
                matched = True
            elif kind == _SPLIT:
                stack += [x for x in (nxt, alt) if x is not None]
            elif (kind == _EPS or (kind == _BEGIN and where & 1) or (kind == _END and where & 6)
                  or (kind == _END_STRING and where & 2)):
                if nxt is not None:
                    stack.append(nxt)
        result = (frozenset(out), matched)
        if len(self._closures) > _MAX_CACHE:
            self._closures.clear()
        self._closures[key] = result
        return result

    def search(self, text: str) -> bool:
        n = len(text)
        begin = frozenset([self.start])
        current: frozenset[int] = frozenset()
        for i in range(n + 1):
            where = (1 if i == 0 else 0) | (2 if i == n else 0) | (4 if i == n - 1 and text[-1] == "\n" else 0)
            current, matched = self._closure(current | begin, where)
            if matched:
                return True
            if i == n:
                return False
            ch = text[i]
            key = (current, ch)
            nxt = self._steps.get(key)
            if nxt is None:
                nxt = frozenset(self.states[s][2] for s in current if self.states[s][1](ch))
                if len(self._steps) > _MAX_CACHE:
                    self._steps.clear()
                self._steps[key] = nxt
            current = nxt
        return False


@lru_cache(maxsize=4096)
def compiled(pattern: str) -> SafeRegex:
    """``SafeRegex(pattern)``, once per pattern (``UnsafePattern`` is raised again each time)."""
    return SafeRegex(pattern)
