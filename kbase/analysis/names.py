"""Kernel names: the one shortener and the family key.

Demangled CUDA kernel names are long C++ signatures (``void at::native::foo<4, F>(int, F)``); a
table shows the base name (``foo``), and the diff pairs kernels whose template arguments changed by
their family key (``at::native::foo``).
"""

from __future__ import annotations


def _outside_brackets(name: str, brackets: str = "<(", closers: str = ">)") -> str:
    """The characters of ``name`` at nesting depth 0 of the given bracket pairs."""
    out = []
    depth = 0
    for ch in name:
        if ch in brackets:
            depth += 1
        elif ch in closers and depth:
            depth -= 1
        elif depth == 0:
            out.append(ch)
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


def short_name(name: str, exported: str | None = None) -> str:
    """The export's own short name when it has one, else the base name: no return type, template
    arguments, argument list or namespaces (``void at::native::foo<4, F>(int, F)`` -> ``foo``)."""
    if exported:
        return exported
    s = name.strip().replace("(anonymous namespace)", "anonymous_namespace")
    words = _outside_brackets(s, "<([{", ">)]}").split()
    if not words:
        return name
    parts = [p for p in words[-1].split("::") if p]
    return parts[-1] if parts else name
