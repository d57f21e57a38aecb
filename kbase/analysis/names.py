"""Kernel names: the one shortener and the family key.

Demangled CUDA kernel names are long C++ signatures (``void at::native::foo<4, F>(int, F)``); a
table shows the base name (``foo``), and the diff pairs kernels whose template arguments changed by
their family key (``at::native::foo``).
"""

from __future__ import annotations

import re
from typing import Any

_BRACKET_RE: dict[str, re.Pattern] = {}


def _outside_brackets(name: str, brackets: str = "<(", closers: str = ">)") -> str:
    """The characters of ``name`` at nesting depth 0 of the given bracket pairs (a closer with nothing
    open is kept as text). The loop visits the brackets only, not every character: a real export's
    template names run to thousands of characters."""
    for opener in brackets:
        if opener in name:
            break
    else:  # nothing opens (half of a real mix: Triton, nvjet, cuBLAS names): a memchr, not a regex scan
        return name
    found = _BRACKET_RE.get(brackets + closers)
    if found is None:
        found = _BRACKET_RE[brackets + closers] = re.compile(f"[{re.escape(brackets + closers)}]")
    out = []
    depth = 0
    last = 0  # where the current depth-0 text began
    for m in found.finditer(name):
        i = m.start()
        if name[i] in brackets:
            if depth == 0:
                out.append(name[last:i])
            depth += 1
        elif depth:
            depth -= 1
            if depth == 0:
                last = i + 1
    if depth == 0:
        out.append(name[last:])
    return "".join(out)


def family_key(name: str) -> str:
    """The name with template arguments ``<…>`` and argument lists ``(…)`` stripped.

    Two instances of one template (other tile sizes, other dtypes) share a family key, so the diff
    can still pair a kernel whose template arguments changed.
    """
    key = _outside_brackets(name).strip()
    if key.startswith("void "):
        key = key[5:]
    return key.strip() or name


_ITANIUM_SOURCE_NAME = re.compile(r"(\d+)")


def qualified_own_name(name: str, family: str | None = None) -> str:
    """The kernel function's qualified name, without return type, template arguments and argument list
    (``void at::native::foo<4, F>(int, F)`` -> ``at::native::foo``); ``family``: ``family_key(name)``
    when already at hand. An Itanium-mangled name (``_ZN2ck6device6kernelI...``) gives its nested
    name (``ck::device::kernel``): HIP traces keep some kernels mangled."""
    if name.startswith("_Z"):
        return _itanium_nested_name(name)
    key = family if family is not None else family_key(name)
    words = key.split()
    return words[-1] if words else key


def own_name(qualified: str) -> str:
    """The last component of a qualified name (``at::native::foo`` -> ``foo``)."""
    return qualified.rsplit("::", 1)[-1] or qualified


def _itanium_nested_name(name: str) -> str:
    """The source names of ``_Z[N]<len><id>...`` up to the first non-name token (``I`` opens the
    template arguments, ``E`` ends the nesting): enough to know a mangled kernel's own name."""
    pos = 3 if name.startswith("_ZN") else 2
    parts = []
    while pos < len(name):
        m = _ITANIUM_SOURCE_NAME.match(name, pos)
        if not m:
            break
        start = m.end()
        length = int(m.group(1))
        parts.append(name[start:start + length])
        pos = start + length
    return "::".join(parts) if parts else name


# Kernels whose own name is a wrapper (``cutlass::Kernel2<X>``, ``cutlass::device_kernel<X>``,
# ``ck_tile::kentry<..., X>``): the wrapped type is the kernel.
WRAPPERS = frozenset({"kernel", "kernel2", "device_kernel", "kentry"})
# a wrapper whose first type argument is a plain type (cuBLAS' ``gemvx::kernel<int, int, float2, …>``) wraps nothing
_PLAIN_TYPE = re.compile(r"(?:unsigned |signed |const )*(?:int|long|short|char|bool|float|double|half|__half|size_t|"
                         r"void|__nv_bfloat16|bfloat16|BFloat16|Half|u?int\d+_t)\d*\s*\**")
_LITERAL = re.compile(r"(?:\([\w ]+\))?\s*-?\d+[uUlL]*|true|false")  # a template argument that is a value
_ARG_PUNCTUATION = re.compile(r"[<>()\[\],]")


def short_name(name: str, exported: str | None = None) -> str:
    """The export's own short name when it has one, else the base name: no return type, template
    arguments, argument list or namespaces (``void at::native::foo<4, F>(int, F)`` -> ``foo``). A wrapper's
    (``WRAPPERS``) is the wrapped type's (``cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_…>`` ->
    ``cutlass_80_tensorop_s1688gemm_…``): two CUTLASS GEMMs do not share the name ``Kernel2``."""
    base = exported or _base_name(name)
    if base.lower() in WRAPPERS:
        inner = _wrapped(name)
        if inner:
            return inner
        # wrapping nothing (cuBLAS' gemvx::kernel<int, …>): its namespace says what it is
        parts = qualified_own_name(name).split("::")
        return "::".join(parts[-2:]) if len(parts) > 1 else base
    return base


def _base_name(name: str) -> str:
    s = name.strip().replace("(anonymous namespace)", "anonymous_namespace")
    words = _outside_brackets(s, "<([{", ">)]}").split()
    if not words:
        return name
    parts = [p for p in words[-1].split("::") if p]
    return parts[-1] if parts else name


def _wrapped(name: str) -> str:
    """The base name of a wrapper kernel's wrapped type: its first template argument that is a type (not a
    number), unwrapped again while that is a wrapper too; "" when there is none."""
    for _ in range(4):
        args = template_args(name)
        if not args:
            return ""
        depth, start, first = 0, 1, ""
        for m in _ARG_PUNCTUATION.finditer(args):  # the loop acts on these only: a long name has few of them
            i = m.start()
            ch = args[i]
            if ch in "<([":
                depth += 1
            elif ch in ">)]":
                depth -= 1
            if (ch == "," and depth == 1) or (depth == 0 and ch == ">"):
                part = args[start:i].strip()
                start = i + 1
                if part and not _LITERAL.fullmatch(part):
                    first = part
                    break
        if not first:
            return ""
        inner = _base_name(first)
        if _PLAIN_TYPE.fullmatch(first) or _PLAIN_TYPE.fullmatch(inner):
            return ""
        if inner.lower() not in WRAPPERS and not inner.startswith("enable_sm"):
            return inner
        name = first
    return ""


def short_id(name: str) -> str:
    """A stable short id of a full name, ``#`` and the first six hex digits of its sha1 (the store's
    name hash): shown where short names collide, accepted wherever a kernel name is asked for."""
    return "#" + _sha1(name.encode("utf-8", "surrogatepass")).hexdigest()[:6]


def _sha1(data: bytes) -> Any:
    """SHA-1 from CPython's own module where it has one: hashlib loads OpenSSL first (~3 ms of a ``kbase top``
    that shows a short id); the same digest."""
    try:
        from _sha1 import sha1
    except ImportError:  # a Python built without it
        from hashlib import sha1
    return sha1(data)


_TEMPLATE_BRACKETS = re.compile(r"[<>()]")


def template_args(name: str) -> str:
    """The template arguments of the named function, namespaces dropped (``void ns::f<4, ns::G<float> >
    (int)`` -> ``<4, G<float>>``), or "" when it has none."""
    depth_paren = 0
    depth = 0
    start = end = -1
    for m in _TEMPLATE_BRACKETS.finditer(name):  # the brackets only, not every character of a long name
        i = m.start()
        ch = name[i]
        if ch == "(" and depth == 0:
            if depth_paren == 0 and end >= 0:
                break
            depth_paren += 1
        elif ch == ")" and depth == 0 and depth_paren:
            depth_paren -= 1
        elif depth_paren == 0 and ch == "<":
            if depth == 0:
                start = i
            depth += 1
        elif depth_paren == 0 and ch == ">" and depth:
            depth -= 1
            if depth == 0:
                end = i
    if start < 0 or end < start:
        return ""
    args = name[start + 1:end]
    if "::" in args:  # a namespace to drop (the search walks every character of a long name)
        args = re.sub(r"\b[A-Za-z_]\w*::", "", args)
    args = re.sub(r"\s+", " ", args).replace(" >", ">").strip()
    return f"<{args}>"


def display_names(names: list[str], shorts: list[str] | None = None, full: bool = False,
                  first: int | None = None) -> list[str]:
    """What a table shows for each kernel: its short name, unless another kernel of the same table has
    the same short name (ignoring case); those show their template arguments and a short id
    (``vectorized_elementwise_kernel<4, FillFunctor<float>> #a1b2c3``). ``full``: the full names.
    ``first``: only the first that many are wanted (collisions are still judged over all of ``names``)."""
    shown = names if first is None else names[:first]
    if full:
        return list(shown)
    base = list(shorts) if shorts is not None else [short_name(n) for n in names]
    groups: dict[str, set[str]] = {}
    for n, s in zip(names, base):
        groups.setdefault(s.casefold(), set()).add(n)
    out = []
    for n, s in zip(shown, base):
        if len(groups[s.casefold()]) > 1:
            out.append(f"{s}{template_args(n)} {short_id(n)}")
        else:
            out.append(s)
    return out


def display_map(kernels: list[tuple[str, str]]) -> dict[str, str]:
    """``display_names`` of (full name, short name) pairs (repeats counted once) as full name -> what a table
    shows: a list of steps or findings names each kernel as a leaderboard does."""
    short = dict(kernels)
    names = list(short)
    return dict(zip(names, display_names(names, [short[n] for n in names])))
