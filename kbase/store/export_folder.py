"""The export folder's side of ``kbase export`` / ``import``: reading and checking its files (each read inside
the folder without following a link), and the packed-column helpers both sides use — a blob's meaning apart
from its coding (``plain``, for the content digest) and its id columns swapped between store ids and file
positions (``relabel``). The store's side is ``transfer``.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbase.errors import InputError
from kbase.safe_write import OutputDir
from kbase.store.export_files import (
    ACCEPTANCE_SUFFIX,
    BASELINE_SUFFIX,
    BLOBS,
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

MAX_FILE = 1 << 30
ID_COLUMNS = {"levels": ("name_id",), "ops": ("op",)}  # store ids: the names and op keys say what they mean


# ------------------------------------------------------------------------------------------ packed columns


def plain(blob: bytes | None, skip: tuple[str, ...] = ()) -> bytes | None:
    """A packed blob's meaning, independent of how it was compressed or coded: its row count, header and each
    column's values (int64 or float64 bits), ``skip``'s columns left out."""
    if blob is None:
        return None
    from kbase.store.packed import Packed

    p = Packed(blob)
    parts = [b"%d|" % p.rows, json.dumps(p.meta, sort_keys=True).encode()]
    for name in p.names:
        if name in skip:
            continue
        if p.is_zero(name):
            parts.append(b"|%s:0" % name.encode())
            continue
        values = p.array(name)
        parts.append(b"|%s:%s%d:" % (name.encode(), values.dtype.char.encode(), len(values)))
        parts.append(values.astype(values.dtype.newbyteorder("<")).tobytes())
    return b"".join(parts)


def relabel(blob: bytes, ids: list[int], column: str = "name_id") -> bytes:
    """The blob with its id column replaced (row i: ``ids[i]``): the ``levels`` blob's kernel name ids, the
    ``ops`` blob's op ids. Every other column keeps its values and its coding (delta, float)."""
    import numpy as np

    from kbase.store.packed import Packed, pack

    p = Packed(blob)
    columns: dict[str, Any] = {}
    for name in p.names:
        values = np.asarray(ids, dtype=np.int64) if name == column else p.array(name)
        columns[name] = (values, p.options(name))
    return pack(p.rows, columns, p.meta)


def level_name_ids(levels: bytes) -> list[int]:
    from kbase.store.packed import Packed

    return Packed(levels).ints("name_id")


def op_ids_of(ops: bytes | None) -> list[int]:
    """The ``ops`` blob's op id of each (kernel, op) pair (0: launched by no op); none without the blob."""
    from kbase.store.packed import Packed

    return Packed(ops).ints("op") if ops is not None else []


def op_positions(ids: list[int]) -> tuple[list[int], list[int]]:
    """(the distinct op ids in first-use order, each pair's 1-based position in that list; 0 stays 0)."""
    order: dict[int, int] = {}
    positions = [0 if i == 0 else order.setdefault(i, len(order)) + 1 for i in ids]
    return list(order), positions


def baseline_columns() -> tuple[str, ...]:
    """The ``baseline`` columns a file holds (every one but the id; ``records.BASELINE_FIELDS``: the model's)."""
    from kbase.store.records import BASELINE_FIELDS

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
        return content in self.tombstones.get(key, ())


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
    """The values have the store's types, the blobs decode within ``limit`` bytes, the names cover the levels'
    ids, the kernel format is known, the digest holds."""
    from kbase.store.import_checks import check_budget, check_names, check_row
    from kbase.store.kernel_blobs import FORMAT as KERNELS_FORMAT
    from kbase.store.packed import PackedError

    if not 1 <= f.header["kernels_format"] <= KERNELS_FORMAT:
        raise ExportFileError(f"kernel data of format {f.header['kernels_format']} (this kbase reads 1 to "
                              f"{KERNELS_FORMAT}; upgrade kbase)")
    unknown = [k for k in f.row if k not in baseline_columns()]
    missing = [k for k in baseline_columns() if k not in f.row and k not in DEFAULTED_COLUMNS]
    if unknown or missing:
        raise ExportFileError(f"baseline columns {'unknown: ' + ', '.join(unknown) if unknown else ''}"
                              f"{'missing: ' + ', '.join(missing) if missing else ''}")
    check_row(stored_row(f.row))
    names = f.header["names"]
    check_names(names, f.header.get("op_names", []))
    if not 0 <= f.header["kernels"] < 1 << 31:
        raise ExportFileError(f"kernels ({f.header['kernels']}) is out of range")
    check_budget(f.blobs, limit)  # before anything is decompressed
    try:
        row_values(f.row)
        ids = level_name_ids(f.blobs["levels"] or b"")
        plains = {b: plain(f.blobs[b], ID_COLUMNS.get(b, ())) for b in BLOBS}
        op_ids = op_ids_of(f.blobs["ops"])
    except (PackedError, ValueError, TypeError, KeyError) as exc:
        raise ExportFileError(f"kernel data unreadable ({exc})") from None
    if any(not 0 <= i < len(names) for i in ids) or len(ids) != f.header["kernels"]:
        raise ExportFileError("the levels' name ids do not match the names listed")
    op_names = f.header.get("op_names", [])
    if any(not 0 <= i <= len(op_names) for i in op_ids) or (op_names and f.blobs["ops"] is None):
        raise ExportFileError("the ops blob's op ids do not match the op names listed")
    if content_digest(f.row, [names[i][0] for i in first_use(ids)], plains,
                      [op_names[i - 1] for i in first_use(op_ids) if i]) != f.content:
        raise ExportFileError("its content digest does not match its kernel data")


def first_use(ids: list[int]) -> list[int]:
    seen: dict[int, None] = {}
    for i in ids:
        seen.setdefault(i, None)
    return list(seen)


def conflict(first: str, second: str, key: tuple) -> InputError:
    workload, commit, sha, window, copy = key
    return InputError(f"{first} and {second} hold different content for one baseline (workload {workload!r}, "
                      f"commit {commit[:12]}, capture {sha[:12]}, window {window!r}, copy {copy}); nothing was "
                      "changed: remove the wrong one")
