"""What the readers do with rows they cannot trust, and how a loss reaches every output.

Rules shared by every reader:

- A kernel row with a missing or impossible field (no start/end/device/name, end before start, a
  negative or out-of-range value) is never read as data: it would make absurd totals or phantom
  GPUs. Such rows are counted, excluded, and named in a note — unless they are more than
  ``MAX_INVALID_FRACTION`` of the rows, in which case the file is refused as damaged.
- Every loss a reader accepts is written to ``profile.extra["notes"]`` (one line each). The window
  copies those notes, so the leaderboard, the stored baseline and every rendered format show them.
- Text that no output can carry faithfully (lone UTF-16 surrogates, NUL) is replaced with U+FFFD
  and counted; other characters are data and left to the renderers to neutralise.
- A name (kernel, NVTX or annotation range, thread, process, GPU) longer than ``MAX_NAME_CHARS`` is not a
  name a profiler writes: the file is refused (``NameTooLong``), and no reader holds more of it in memory
  than the cap (SQL reads cut it with ``capped_sql``; the JSON stream refuses any one value past
  ``kineto_json.MAX_VALUE_CHARS`` before it is decoded).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from kbase.errors import InputError

# More invalid kernel rows than this share of a file and it is refused rather than read without them.
MAX_INVALID_FRACTION = 0.01

# The largest step number a marker range (``ProfilerStep#N``, ``step N``) may carry: 2^53 - 1, the largest
# integer every consumer of kbase's JSON (JavaScript's numbers, the report's charts) holds exactly; a real run
# counts steps in the millions. A larger one (or a 5,000-digit one) is damage, not a step.
MAX_STEP_NUMBER = 2**53 - 1

_UNWRITABLE = re.compile("[\x00\ud800-\udfff]")
REPLACEMENT = "\ufffd"


# 64 Ki characters: the longest C++ template kernel names seen in real captures (CUTLASS/CuTe, nvFuser, Flash
# attention) are 1-30 thousand characters, so this leaves room for twice the worst; a name of megabytes is
# damage or an attack (one 2 GiB name in a 1 MiB gzipped trace), and every stage after the reader (name
# classification, tables, the store) would pay for it.
MAX_NAME_CHARS = 1 << 16


class NameTooLong(ValueError):
    """A name past ``MAX_NAME_CHARS``; the reader turns it into an ``InputError`` naming its file."""

    def __init__(self, what: str) -> None:
        super().__init__(f"a {what} of more than {MAX_NAME_CHARS:,} characters: not a name a profiler writes "
                         "(kbase reads names up to that length), refusing the file")


def check_name(value, what: str):
    """``value`` itself, or ``NameTooLong`` when it is a text (or bytes) longer than ``MAX_NAME_CHARS``."""
    if isinstance(value, (str, bytes)) and len(value) > MAX_NAME_CHARS:
        raise NameTooLong(what)
    return value


def capped_sql(expr: str) -> str:
    """A SQL expression of ``expr`` that never hands Python more than 4 bytes a character of ``MAX_NAME_CHARS``:
    a longer text or blob comes back as a blob just past that (which ``check_name`` refuses), anything else
    as it is. (Bytes, not ``substr`` or ``length`` of the text: those stop at a NUL inside it.)"""
    limit = 4 * MAX_NAME_CHARS
    return (f"(CASE WHEN typeof({expr}) IN ('text', 'blob') AND length(CAST({expr} AS BLOB)) > {limit} "
            f"THEN zeroblob({limit + 1}) ELSE {expr} END)")


def add_note(extra: dict, note: str) -> None:
    """Record one line about data the reader left out or changed (shown by every output)."""
    extra.setdefault("notes", []).append(note)


def clean_text(value: str) -> str:
    """``value`` with lone surrogates and NUL replaced (they cannot be encoded, stored or printed)."""
    if value.isascii() and "\x00" not in value:  # almost every name: no regex scan (17k NVTX names: ~15 ms)
        return value
    return _UNWRITABLE.sub(REPLACEMENT, value) if _UNWRITABLE.search(value) else value


def clean_names(names: Iterable[str]) -> tuple[list[str], int]:
    """Cleaned copies of ``names`` and how many were changed."""
    out: list[str] = []
    changed = 0
    for name in names:
        fixed = clean_text(name)
        changed += fixed is not name
        out.append(fixed)
    return out, changed


def step_number(digits: str, name: str, label: str) -> int:
    """The step number ``digits`` (taken from the range named ``name``) as an int; an ``InputError`` naming
    ``label`` (the file) when it is past ``MAX_STEP_NUMBER``."""
    significant = digits.lstrip("0") or "0"
    if len(significant) <= 16 and int(significant) <= MAX_STEP_NUMBER:
        return int(significant)
    shown = significant if len(significant) <= 24 else significant[:24] + f"… ({len(significant):,} digits)"
    raise InputError(f"{label}: marker range {name[:80]!r} numbers step {shown}, past {MAX_STEP_NUMBER:,}: "
                     "not a training step number")


def describe_reasons(reasons: Mapping[str, int]) -> str:
    return ", ".join(f"{n:,} {why}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1]) if n)


def invalid_rows_note(label: str, what: str, n_bad: int, n_total: int, reasons: Mapping[str, int]) -> str | None:
    """The note for ``n_bad`` excluded rows out of ``n_total``, or an error when they are too many.

    ``label`` names the file in the error; ``what`` is the kind of row ("kernel rows").
    """
    if n_bad == 0:
        return None
    detail = describe_reasons(reasons)
    if n_total == 0 or n_bad > MAX_INVALID_FRACTION * n_total:
        raise InputError(
            f"{label}: {n_bad:,} of {n_total:,} {what} have missing or invalid fields ({detail}); more than "
            f"{MAX_INVALID_FRACTION:.0%} of the data is damaged, refusing to read it"
        )
    return f"excluded {n_bad:,} of {n_total:,} {what} with missing or invalid fields ({detail})"
