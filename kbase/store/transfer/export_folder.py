"""The export folder's side of ``kbase export`` / ``import``: reading and checking its files (each read inside
the folder without following a link; a file of format 1 converted as it is read, ``format1_files.file_as_format2``).
The store's side is ``transfer``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbase.errors import InputError
from kbase.safe_write import OutputDir
from kbase.store.transfer.export_files import (
    ACCEPTANCE_SUFFIX,
    ANY_CONTENT,
    BASELINE_SUFFIX,
    FORMAT,
    TOMBSTONE_SUFFIX,
    BaselineFile,
    ExportFileError,
    content_digest,
    file_name,
    parse_acceptance,
    parse_baseline,
    parse_tombstone,
    row_values,
)
from kbase.store.transfer.import_checks import check_budget, check_names, check_row

MAX_FILE = 1 << 30


def baseline_columns() -> tuple[str, ...]:
    """The ``baseline`` columns a file holds (every one but the id; ``records.BASELINE_FIELDS``: the model's)."""
    from kbase.store.schema.records import BASELINE_FIELDS

    return tuple(c for c in BASELINE_FIELDS if c != "id")


# Columns added after format 1 whose default a file leaves out: an ordinary baseline's file stays byte for byte
# what earlier versions wrote (its name is its hash: a re-export must not add a second file per baseline), and
# a file without the column reads as the default.
DEFAULTED_COLUMNS: dict[str, Any] = {"kind": "snapshot", "step_ns": None, "idle_ns": None, "capture_span": None}


def file_row(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row as its file holds it: the ``DEFAULTED_COLUMNS`` at their default left out."""
    return {k: v for k, v in row.items() if not (k in DEFAULTED_COLUMNS and v == DEFAULTED_COLUMNS[k])}


def stored_row(row: dict[str, Any]) -> dict[str, Any]:
    """A file's row as the store takes it: the ``DEFAULTED_COLUMNS`` it leaves out at their default."""
    return {**DEFAULTED_COLUMNS, **row}

# ------------------------------------------------------------------------------------------ the folder


@dataclass
class Folder:
    """An export folder's files, each read and checked: baselines by file name, tombstones, acceptances."""

    path: Path
    baselines: dict[str, BaselineFile] = field(default_factory=dict)
    tombstones: dict[tuple, set[str]] = field(default_factory=dict)  # key -> deleted contents
    tombstone_names: set[str] = field(default_factory=set)
    acceptances: dict[str, dict[str, Any]] = field(default_factory=dict)

    def by_key(self) -> dict[tuple, list[tuple[str, BaselineFile]]]:
        out: dict[tuple, list[tuple[str, BaselineFile]]] = {}
        for name in sorted(self.baselines):
            f = self.baselines[name]
            out.setdefault(f.key, []).append((name, f))
        return out

    def deleted(self, key: tuple, content: str) -> bool:
        contents = self.tombstones.get(key, ())
        return content in contents or ANY_CONTENT in contents


def _read_entry(d: OutputDir, name: str, limit: int) -> bytes:
    kind = d.kind(name)
    if kind == "link":
        raise InputError("is a symbolic link; kbase does not read export files through links", field=d.field,
                         value=str(d.path / name))
    if kind != "file":
        raise InputError("is not a regular file", field=d.field, value=str(d.path / name))
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), dir_fd=d.fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError("is not a regular file", field=d.field, value=str(d.path / name))
        chunks, size = [], 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if size > limit:  # counted as read, not from fstat: a file that grows while read is bounded too
                raise InputError(f"is larger than the import limit of {limit >> 20:,} MiB per file (import_max_mb)",
                                 field=d.field, value=str(d.path / name))
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_folder(d: OutputDir, *, check_blobs: bool = True, limit: int = MAX_FILE) -> Folder:
    """Every export file of the folder, checked: its name is the hash of its bytes, it parses, its values have
    the store's types (``import_checks``), its blobs are packed columns that decode within ``limit`` bytes and
    its content digest is what it says (``check_blobs``). Any bad file: ``InputError`` naming it. Other files
    (a README, dot files) are left alone."""
    folder = Folder(d.path)
    for name in d.names():
        if name.startswith("."):
            continue
        suffix = next((s for s in (BASELINE_SUFFIX, TOMBSTONE_SUFFIX, ACCEPTANCE_SUFFIX) if name.endswith(s)), None)
        if suffix is None:
            continue
        data = _read_entry(d, name, limit)
        where = str(d.path / name)
        try:
            if file_name(data, suffix) != name:
                raise ExportFileError("its content does not match its name (edited or damaged)")
            if suffix == BASELINE_SUFFIX:
                f = parse_baseline(data)
                if f.version != FORMAT:  # (format 1: its own checks, then the same baseline in format 2)
                    from kbase.store.transfer.format1_files import file_as_format2

                    f = file_as_format2(f, limit, check=check_blobs)
                if check_blobs:
                    _check_baseline(f, limit)
                folder.baselines[name] = f
            elif suffix == TOMBSTONE_SUFFIX:
                key, content = parse_tombstone(data)
                folder.tombstones.setdefault(key, set()).add(content)
                folder.tombstone_names.add(name)
            else:
                folder.acceptances[name] = parse_acceptance(data)
        except ExportFileError as exc:
            raise InputError(str(exc), field=d.field, value=where) from None
    return folder


def _check_baseline(f: BaselineFile, limit: int) -> None:
    """The values have the store's types, the blobs decode within ``limit`` bytes, the names and op names cover
    the kernel table's rows and the ops blob's positions, the kernel format is this kbase's, the digest holds."""
    from kbase.store.codec.kernel_blobs import FORMAT as KERNELS_FORMAT
    from kbase.store.codec.packed import Packed, PackedError

    if f.header["kernels_format"] != KERNELS_FORMAT:
        raise ExportFileError(f"kernel data of format {f.header['kernels_format']} in a file of format {FORMAT} "
                              f"(this kbase reads {KERNELS_FORMAT} in it; upgrade kbase)")
    unknown = [k for k in f.row if k not in baseline_columns()]
    missing = [k for k in baseline_columns() if k not in f.row and k not in DEFAULTED_COLUMNS]
    if unknown or missing:
        raise ExportFileError(f"baseline columns {'unknown: ' + ', '.join(unknown) if unknown else ''}"
                              f"{'missing: ' + ', '.join(missing) if missing else ''}")
    check_row(stored_row(f.row))
    names, op_names = f.header["names"], f.header.get("op_names", [])
    check_names(names, op_names)
    if len({n[0] for n in names}) != len(names) or len({k for k, _ in op_names}) != len(op_names):
        raise ExportFileError("a kernel name or op key is listed twice")
    if not 0 <= f.header["kernels"] < 1 << 31:
        raise ExportFileError(f"kernels ({f.header['kernels']}) is out of range")
    check_budget(f.blobs, limit)  # before anything is decompressed
    try:
        row_values(f.row)
        rows = Packed(f.blobs["levels"] or b"").rows
        positions = Packed(f.blobs["ops"]).ints("op") if f.blobs["ops"] is not None else []
        digest = content_digest(f.row, [n[0] for n in names], f.blobs, op_names)
    except (PackedError, ValueError, TypeError, KeyError) as exc:
        raise ExportFileError(f"kernel data unreadable ({exc})") from None
    if rows != len(names) or rows != f.header["kernels"]:
        raise ExportFileError(f"the kernel table's {rows} rows do not match the {len(names)} names listed")
    if any(not 0 <= i <= len(op_names) for i in positions) or (op_names and f.blobs["ops"] is None):
        raise ExportFileError("the ops blob's op positions do not match the op names listed")
    if digest != f.content:
        raise ExportFileError("its content digest does not match its kernel data")


def conflict(first: str, second: str, key: tuple) -> InputError:
    workload, commit, sha, window, copy = key
    return InputError(f"{first} and {second} hold different content for one baseline (workload {workload!r}, "
                      f"commit {commit[:12]}, capture {sha[:12]}, window {window!r}, copy {copy}); nothing was "
                      "changed: remove the wrong one")
