"""The files of ``kbase export`` (docs/export-format.md): one per baseline, per deletion (a tombstone) and per
acceptance, each named by the sha256 of its bytes, so two runners exporting into one folder never write the
same name with different bytes.

A baseline file::

    KBASE-BASELINE 2\\n
    {header: JSON, ASCII, sorted keys, one line}\\n
    the levels, board, samples and sketches blobs (``kernel_blobs``), then the ops blob when the baseline has
    one (``op_blobs``: its kernel time by op), back to back: the very bytes the store keeps

The header holds the baseline row (every column but its id), the kernel of each row of the kernel table
(``names``: [name, family, short name, category, tc], rank order), the op list (``op_names``: [key, op] by
position: the ops blob's ``op`` column k > 0 names ``op_names[k - 1]``, 0 no op), each blob's length, and
``content``: the digest of what was measured (``content_digest``: the measurement's columns, the names and the
blobs' canonical bytes, not when or by whom it was stored), which decides whether two files of one capture key
(workload, commit, source sha256, window, copy) are the same baseline. Nothing is rewritten between a store and
a file: the blobs refer to kernels and ops by position. Files of format 1 (store ids rewritten as positions,
another digest) are read and converted (``format1_file``). Tombstones and acceptances are one JSON line each.
Everything here is pure: bytes in, bytes out.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from kbase.store.transfer.import_checks import (
    ACCEPTANCE_FIELDS,
    KEY,
    ExportFileError,
    check_acceptance,
    check_key,
    strict_json,
)

FORMAT = 2
MAGIC = b"KBASE-BASELINE 2\n"
MAGIC_1 = b"KBASE-BASELINE 1\n"  # format 1: read and converted
BASELINE_SUFFIX, TOMBSTONE_SUFFIX, ACCEPTANCE_SUFFIX = ".baseline", ".deleted", ".acceptance"
TOMBSTONE_FORMAT, ACCEPTANCE_FORMAT = "kbase.tombstone/2", "kbase.acceptance/1"
# A tombstone written before kernel-table format 2 names a format-1 content digest, which no format-2 baseline
# carries: it deletes whatever content its key holds (a key names one capture of one source file).
LEGACY_TOMBSTONE_FORMAT, ANY_CONTENT = "kbase.tombstone/1", "*"
NAME_HEX = 40  # file names: the first 160 bits of the sha256 of the bytes, as git names its objects
BLOBS = ("levels", "board", "samples", "sketches", "ops")  # "ops": absent (null) for a baseline without
# Columns that say when, where and by whom a baseline was stored, not what was measured: two stores that took
# the same capture apart differ in them and still hold the same baseline.
BOOKKEEPING = frozenset({"created_at", "branch", "detached", "dirty", "host", "tags", "note", "kbase_version",
                         "source_name", "source_mtime_ns", "source_probe", "kind"})
# columns derived from another one (the budget's figures and the capture's span, from summary_json): not in the
# content digest, so a file written before they existed and the same baseline exported again are one content
DERIVED = frozenset({"step_ns", "idle_ns", "capture_span"})
DATETIMES = ("created_at", "commit_date")
MAX_HEADER = 64 << 20


def _json(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def file_name(data: bytes, suffix: str) -> str:
    return hashlib.sha256(data).hexdigest()[:NAME_HEX] + suffix


def jsonable_row(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row's values as JSON holds them: datetimes and dates as ISO 8601 text (UTC)."""
    out = {}
    for k, v in row.items():
        if isinstance(v, datetime):
            from datetime import UTC

            v = (v if v.utcoffset() is not None else v.replace(tzinfo=UTC)).astimezone(UTC).isoformat()
        elif isinstance(v, date):
            v = v.isoformat()
        out[k] = v
    return out


def row_values(row: dict[str, Any], datetimes: tuple[str, ...] = DATETIMES, dates: tuple[str, ...] = ()) -> dict:
    """``jsonable_row`` read back: the values a store insert takes."""
    out = dict(row)
    for k in datetimes:
        if out.get(k) is not None:
            out[k] = datetime.fromisoformat(out[k])
    for k in dates:
        if out.get(k) is not None:
            out[k] = date.fromisoformat(out[k])
    return out


def key_of(row: dict[str, Any]) -> tuple:
    return tuple(row[k] for k in KEY)


def content_digest(row: dict[str, Any], names: list[str], blobs: dict[str, bytes | None],
                   op_names: list[list[str]] | None = None) -> str:
    """What was measured, as a hash of canonical bytes: the baseline's measurement columns, its kernels' names in
    row order, its op keys by position and each blob's canonical bytes (``packed.canonical``: the bytes stored,
    their payload uncompressed), independent of the store, of the compressor's build and of who stored it
    when."""
    from kbase.store.codec.packed import canonical

    h = hashlib.sha256()
    skip = BOOKKEEPING | DERIVED | {"id"}
    h.update(_json({k: v for k, v in jsonable_row(row).items() if k not in skip}))
    h.update(_json(names))
    if op_names:
        h.update(_json(op_names))
    for name in BLOBS:
        blob = blobs.get(name)
        plain = None if blob is None else canonical(blob)
        h.update(b"-" if plain is None else b"+%d:" % len(plain) + plain)
    return h.hexdigest()


@dataclass
class BaselineFile:
    """One baseline as a file: its header and blobs."""

    header: dict[str, Any]
    blobs: dict[str, bytes | None]

    @property
    def row(self) -> dict[str, Any]:
        return self.header["baseline"]

    @property
    def key(self) -> tuple:
        return key_of(self.row)

    @property
    def content(self) -> str:
        return str(self.header["content"])

    @property
    def version(self) -> int:
        return int(self.header["format"])

    def to_bytes(self) -> bytes:
        lengths = {b: (None if self.blobs.get(b) is None else len(self.blobs[b] or b"")) for b in BLOBS}
        head = _json({**self.header, "blobs": lengths})
        magic = MAGIC if self.version == FORMAT else MAGIC_1
        return magic + head + b"\n" + b"".join(self.blobs[b] or b"" for b in BLOBS)


def parse_baseline(data: bytes) -> BaselineFile:
    """A baseline file's header and blobs; ``ExportFileError`` saying what is wrong."""
    version = FORMAT if data.startswith(MAGIC) else 1 if data.startswith(MAGIC_1) else None
    if version is None:
        if data.startswith(b"KBASE-BASELINE "):
            got = data[15:24].split(b"\n")[0].decode("ascii", "replace")
            raise ExportFileError(f"format {got!r} is not one this kbase reads (it reads 1 and {FORMAT}; upgrade "
                                  "kbase)")
        raise ExportFileError("not a kbase baseline file (bad first line)")
    end = data.find(b"\n", len(MAGIC), len(MAGIC) + MAX_HEADER)
    if end < 0:
        raise ExportFileError("truncated header")
    header = strict_json(data[len(MAGIC) : end], "header")
    if not isinstance(header, dict) or header.get("format") != version:
        raise ExportFileError(f"header format {header.get('format') if isinstance(header, dict) else '?'!r} is not "
                              f"{version}")
    for field, kind in (("baseline", dict), ("names", list), ("blobs", dict), ("content", str),
                        ("kernels_format", int), ("kernels", int)):
        if not isinstance(header.get(field), kind) or (kind is int and isinstance(header[field], bool)):
            raise ExportFileError(f"header field {field!r} missing or not a {kind.__name__}")
    row = header["baseline"]
    missing = [k for k in KEY if k not in row]
    if missing:
        raise ExportFileError(f"baseline lacks {', '.join(missing)}")
    check_key({k: row[k] for k in KEY}, "baseline")
    lengths = header.pop("blobs")
    blobs: dict[str, bytes | None] = {}
    at = end + 1
    for b in BLOBS:
        n = lengths.get(b)
        if n is None:
            if b in ("levels", "board"):
                raise ExportFileError(f"no {b} blob")
            blobs[b] = None
            continue
        if not isinstance(n, int) or n < 0 or at + n > len(data):
            raise ExportFileError(f"{b} blob: length {n!r} runs past the end of the file (truncated?)")
        blobs[b] = data[at : at + n]
        at += n
    if at != len(data):
        raise ExportFileError(f"{len(data) - at} trailing byte(s) after the blobs")
    return BaselineFile(header, blobs)


# ------------------------------------------------------------------------------------------ small JSON files


def tombstone_bytes(key: tuple, content: str) -> bytes:
    """The tombstone of a deleted baseline: its capture key and content digest (the same deletion, the same
    bytes, whoever writes it)."""
    return _json({"format": TOMBSTONE_FORMAT, "key": dict(zip(KEY, key)), "content": content}) + b"\n"


def parse_tombstone(data: bytes) -> tuple[tuple, str]:
    """(key, content digest) of a tombstone; ``ANY_CONTENT`` for a format-1 one (see ``LEGACY_TOMBSTONE_FORMAT``)."""
    doc = _small_json(data, TOMBSTONE_FORMAT, LEGACY_TOMBSTONE_FORMAT)
    legacy = doc["format"] == LEGACY_TOMBSTONE_FORMAT
    key, content = doc.get("key"), doc.get("content")
    if not isinstance(key, dict) or any(k not in key for k in KEY) or not isinstance(content, str):
        raise ExportFileError("a tombstone needs key (workload, commit, source_sha256, window_spec, capture_copy) "
                              "and content")
    check_key(key, "tombstone")
    return key_of(key), ANY_CONTENT if legacy else content


def acceptance_bytes(row: dict[str, Any]) -> bytes:
    values = jsonable_row({k: row[k] for k in ACCEPTANCE_FIELDS})
    return _json({"format": ACCEPTANCE_FORMAT, **values}) + b"\n"


def parse_acceptance(data: bytes) -> dict[str, Any]:
    doc = _small_json(data, ACCEPTANCE_FORMAT)
    check_acceptance(doc)
    try:
        return row_values({k: doc.get(k) for k in ACCEPTANCE_FIELDS}, ("created_at",), ("expires",))
    except ValueError as exc:
        raise ExportFileError(f"acceptance: {exc}") from None


def _small_json(data: bytes, fmt: str, *also_read: str) -> dict[str, Any]:
    if len(data) > 1 << 20:
        raise ExportFileError("too large for a small JSON file")
    doc = strict_json(data)
    if not isinstance(doc, dict) or doc.get("format") not in (fmt, *also_read):
        raise ExportFileError(f"format is not {fmt!r}")
    return doc
