"""Baselines as files (``export_files``) to and from the store: ``export`` writes what the folder lacks,
``import_folder`` merges a folder into the store in one transaction after checking every file, and
``tombstone_baselines`` records deletions (``kbase prune --export``) so that they travel too.

Idempotence and conflicts go by the capture key (workload, commit, source sha256, window, copy: the store's
unique key) and the content digest (``export_files.content_digest``): one key, one content is the same baseline
however often it is exported or imported; one key, two contents is refused, naming both, with nothing changed.
Every file is read and written inside the folder without following a link (``safe_write.OutputDir``).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbase.errors import InputError, KbaseError, StoreError
from kbase.safe_write import OutputDir
from kbase.store.export_files import (
    ACCEPTANCE_SUFFIX,
    BASELINE_SUFFIX,
    BLOBS,
    FORMAT,
    TOMBSTONE_SUFFIX,
    BaselineFile,
    ExportFileError,
    acceptance_bytes,
    content_digest,
    file_name,
    jsonable_row,
    key_of,
    parse_acceptance,
    parse_baseline,
    parse_tombstone,
    row_values,
    tombstone_bytes,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from kbase.store.engine import Store

_CHUNK = 200  # baselines read at a time
MAX_FILE = 1 << 30


# ------------------------------------------------------------------------------------------ packed columns


def _plain(blob: bytes | None, skip: tuple[str, ...] = ()) -> bytes | None:
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


def _relabel(blob: bytes, ids: list[int], column: str = "name_id") -> bytes:
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


def _name_ids(levels: bytes) -> list[int]:
    from kbase.store.packed import Packed

    return Packed(levels).ints("name_id")


def _op_ids(ops: bytes | None) -> list[int]:
    """The ``ops`` blob's op id of each (kernel, op) pair (0: launched by no op); none without the blob."""
    from kbase.store.packed import Packed

    return Packed(ops).ints("op") if ops is not None else []


def _op_positions(ids: list[int]) -> tuple[list[int], list[int]]:
    """(the distinct op ids in first-use order, each pair's 1-based position in that list; 0 stays 0)."""
    order: dict[int, int] = {}
    positions = [0 if i == 0 else order.setdefault(i, len(order)) + 1 for i in ids]
    return list(order), positions


# ------------------------------------------------------------------------------------------ reading the store


def _columns() -> tuple[str, ...]:
    from kbase.store.models import BASELINE

    return tuple(c.name for c in BASELINE.columns if c.name != "id")


@dataclass
class Stored:
    """One stored baseline in export terms: its row, its kernels' names in row order, its blobs, its digest."""

    id: int
    row: dict[str, Any]
    names: list[tuple[str, str, str, str, str]]  # (name, family, short name, category, tc) in first-use order
    positions: list[int]  # row i -> its kernel's index in ``names``
    op_names: list[list[str]]  # [key, op] of the ops blob's op ids in first-use order
    op_positions: list[int]  # pair i -> its op's 1-based index in ``op_names`` (0: no op)
    blobs: dict[str, bytes | None]
    kernels_format: int
    kernels: int
    content: str

    @property
    def key(self) -> tuple:
        return key_of(self.row)

    def file(self) -> BaselineFile:
        blobs = dict(self.blobs)
        if blobs["levels"] is not None:
            blobs["levels"] = _relabel(blobs["levels"], self.positions)
        if blobs["ops"] is not None:
            blobs["ops"] = _relabel(blobs["ops"], self.op_positions, "op")
        header = {"format": FORMAT, "baseline": jsonable_row(self.row), "names": [list(n) for n in self.names],
                  "kernels_format": self.kernels_format, "kernels": self.kernels, "content": self.content}
        if blobs["ops"] is not None:
            header["op_names"] = self.op_names
        return BaselineFile(header, blobs)


def read_stored(conn: Connection, ids: list[int]) -> dict[int, Stored]:
    """The given baselines as ``Stored`` (kernel tables, names and content digests)."""
    from sqlalchemy import select

    from kbase.store.kernel_blobs import FORMAT as KERNELS_FORMAT
    from kbase.store.kernel_blobs import empty_table, encode
    from kbase.store.models import BASELINE, BASELINE_KERNELS, KERNEL_NAME, OP_NAME

    cols = _columns()
    out: dict[int, Stored] = {}
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        rows = {r.id: r._mapping for r in conn.execute(select(BASELINE).where(BASELINE.c.id.in_(chunk)))}
        bk = BASELINE_KERNELS
        tables = {r.baseline_id: r for r in conn.execute(select(bk).where(bk.c.baseline_id.in_(chunk)))}
        used = sorted({n for t in tables.values() for n in _name_ids(t.levels)})
        kn = KERNEL_NAME
        names = {r.id: (r.name, r.family, r.short_name, r.category, r.tc) for j in range(0, len(used), 500)
                 for r in conn.execute(select(kn).where(kn.c.id.in_(used[j : j + 500])))}
        used_ops = sorted({o for t in tables.values() for o in _op_ids(t.ops)} - {0})
        ops = {r.id: [r.key, r.op] for j in range(0, len(used_ops), 500)
               for r in conn.execute(select(OP_NAME).where(OP_NAME.c.id.in_(used_ops[j : j + 500])))}
        for bid in chunk:
            if bid not in rows:
                continue
            row = {c: rows[bid][c] for c in cols}
            t = tables.get(bid)
            blobs: dict[str, bytes | None] = {b: None for b in BLOBS}
            order: dict[int, int] = {}
            positions: list[int] = []
            if t is not None:
                blobs = {b: (bytes(getattr(t, b)) if getattr(t, b) is not None else None) for b in BLOBS}
                positions = [order.setdefault(n, len(order)) for n in _name_ids(t.levels)]
            else:  # no kernel table stored: the empty one
                e = encode(empty_table())
                blobs = {"levels": e.levels, "board": e.board, "samples": e.samples, "sketches": e.sketches,
                         "ops": None}
            op_order, op_positions = _op_positions(_op_ids(blobs["ops"]))
            listed = [names[n] for n in order]
            op_names = [ops[o] for o in op_order]
            out[bid] = Stored(bid, row, listed, positions, op_names, op_positions, blobs,
                              int(t.format) if t is not None else KERNELS_FORMAT,
                              int(t.kernels) if t is not None else 0,
                              _content(row, [n[0] for n in listed], blobs, op_names))
    return out


_ID_COLUMNS = {"levels": ("name_id",), "ops": ("op",)}  # store ids: the names and op keys say what they mean


def _content(row: dict[str, Any], names: list[str], blobs: dict[str, bytes | None],
             op_names: list[list[str]]) -> str:
    return content_digest(row, names, {b: _plain(blobs[b], _ID_COLUMNS.get(b, ())) for b in BLOBS}, op_names)


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


def _read_entry(d: OutputDir, name: str) -> bytes:
    kind = d.kind(name)
    if kind == "link":
        raise InputError("is a symbolic link; kbase does not read export files through links", field=d.field,
                         value=str(d.path / name))
    if kind != "file":
        raise InputError("is not a regular file", field=d.field, value=str(d.path / name))
    fd = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), dir_fd=d.fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size > MAX_FILE:
            raise InputError("is not a regular file of a sane size", field=d.field, value=str(d.path / name))
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_folder(d: OutputDir, *, check_blobs: bool = True) -> Folder:
    """Every export file of the folder, checked: its name is the hash of its bytes, it parses, its blobs are
    packed columns and its content digest is what it says (``check_blobs``). Any bad file: ``InputError``
    naming it. Other files (a README, dot files) are left alone."""
    folder = Folder(d.path)
    for name in d.names():
        if name.startswith("."):
            continue
        suffix = next((s for s in (BASELINE_SUFFIX, TOMBSTONE_SUFFIX, ACCEPTANCE_SUFFIX) if name.endswith(s)), None)
        if suffix is None:
            continue
        data = _read_entry(d, name)
        where = str(d.path / name)
        try:
            if file_name(data, suffix) != name:
                raise ExportFileError("its content does not match its name (edited or damaged)")
            if suffix == BASELINE_SUFFIX:
                f = parse_baseline(data)
                if check_blobs:
                    _check_baseline(f)
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


def _check_baseline(f: BaselineFile) -> None:
    """The blobs decode, the names cover the levels' ids, the kernel format is known, the digest holds."""
    from kbase.store.kernel_blobs import FORMAT as KERNELS_FORMAT
    from kbase.store.packed import PackedError

    if f.header["kernels_format"] > KERNELS_FORMAT:
        raise ExportFileError(f"kernel data of format {f.header['kernels_format']} (this kbase reads up to "
                              f"{KERNELS_FORMAT}; upgrade kbase)")
    unknown = [k for k in f.row if k not in _columns()]
    missing = [k for k in _columns() if k not in f.row]
    if unknown or missing:
        raise ExportFileError(f"baseline columns {'unknown: ' + ', '.join(unknown) if unknown else ''}"
                              f"{'missing: ' + ', '.join(missing) if missing else ''}")
    names = f.header["names"]
    if not all(isinstance(n, list) and len(n) == 5 and all(isinstance(x, str) for x in n) for n in names):
        raise ExportFileError("names must be [name, family, short name, category, tc] lists")
    try:
        row_values(f.row)
        ids = _name_ids(f.blobs["levels"] or b"")
        plains = {b: _plain(f.blobs[b], _ID_COLUMNS.get(b, ())) for b in BLOBS}
        op_ids = _op_ids(f.blobs["ops"])
    except (PackedError, ValueError, TypeError, KeyError) as exc:
        raise ExportFileError(f"kernel data unreadable ({exc})") from None
    if any(not 0 <= i < len(names) for i in ids) or len(ids) != f.header["kernels"]:
        raise ExportFileError("the levels' name ids do not match the names listed")
    op_names = f.header.get("op_names", [])
    if not isinstance(op_names, list) or not all(
            isinstance(n, list) and len(n) == 2 and all(isinstance(x, str) for x in n) for n in op_names):
        raise ExportFileError("op_names must be [op key, op] lists")
    if any(not 0 <= i <= len(op_names) for i in op_ids) or (op_names and f.blobs["ops"] is None):
        raise ExportFileError("the ops blob's op ids do not match the op names listed")
    if content_digest(f.row, [names[i][0] for i in _first_use(ids)], plains,
                      [op_names[i - 1] for i in _first_use(op_ids) if i]) != f.content:
        raise ExportFileError("its content digest does not match its kernel data")


def _first_use(ids: list[int]) -> list[int]:
    seen: dict[int, None] = {}
    for i in ids:
        seen.setdefault(i, None)
    return list(seen)


def conflict(first: str, second: str, key: tuple) -> InputError:
    workload, commit, sha, window, copy = key
    return InputError(f"{first} and {second} hold different content for one baseline (workload {workload!r}, "
                      f"commit {commit[:12]}, capture {sha[:12]}, window {window!r}, copy {copy}); nothing was "
                      "changed: remove the wrong one")


# ------------------------------------------------------------------------------------------ export


@dataclass
class ExportResult:
    """What an export did: baselines and acceptances looked at, files written (their names), files the folder
    held already, baselines left out because the folder holds their tombstone."""

    folder: Path
    baselines: int = 0
    acceptances: int = 0
    written: int = 0
    present: int = 0
    tombstoned: int = 0
    files: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"<ExportResult {self.written} written, {self.present} already in {self.folder}>"


def export(st: Store, d: OutputDir, workload: str | None = None) -> ExportResult:
    """Write into the folder each stored baseline (of ``workload``, else all) and acceptance it does not hold
    yet; a baseline whose key it holds with the same content, or a tombstone of, is left alone; with another
    content, refused (``conflict``) before anything is written. Nothing in the folder is ever rewritten."""
    from sqlalchemy import select

    from kbase.store.models import ACCEPTANCE, BASELINE

    folder = read_folder(d, check_blobs=False)  # (what this export compares with: keys and contents)
    present = {f.key: (name, f.content) for name, f in sorted(folder.baselines.items(), reverse=True)}
    out = ExportResult(d.path)
    plan: list[tuple[str, bytes]] = []
    with st.engine.connect() as conn:
        q = select(BASELINE.c.id).order_by(BASELINE.c.id)
        if workload:
            q = q.where(BASELINE.c.workload == workload)
        ids = [r[0] for r in conn.execute(q)]
        for i in range(0, len(ids), _CHUNK):
            for s in read_stored(conn, ids[i : i + _CHUNK]).values():
                out.baselines += 1
                if folder.deleted(s.key, s.content):
                    out.tombstoned += 1
                    continue
                there = present.get(s.key)
                if there is not None:
                    if there[1] != s.content:
                        raise conflict(str(d.path / there[0]), f"the store's @{s.id}", s.key)
                    out.present += 1
                    continue
                data = s.file().to_bytes()
                plan.append((file_name(data, BASELINE_SUFFIX), data))
        q = select(ACCEPTANCE).order_by(ACCEPTANCE.c.id)
        if workload:
            q = q.where(ACCEPTANCE.c.workload == workload)
        for r in conn.execute(q):
            out.acceptances += 1
            data = acceptance_bytes(dict(r._mapping))
            name = file_name(data, ACCEPTANCE_SUFFIX)
            if name in folder.acceptances:
                out.present += 1
            else:
                plan.append((name, data))
    for name, data in plan:
        d.write(name, data)
        out.files.append(name)
    out.written = len(plan)
    return out


# ------------------------------------------------------------------------------------------ import


@dataclass
class ImportResult:
    """What an import did: baselines added (their new ids), already stored, deleted by tombstones, left out
    because of a tombstone, acceptances added."""

    folder: Path
    added: int = 0
    already: int = 0
    deleted: int = 0
    skipped_tombstoned: int = 0
    acceptances_added: int = 0
    added_ids: list[int] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"<ImportResult {self.added} added, {self.already} already stored, {self.deleted} deleted>"


def import_folder(st: Store, d: OutputDir) -> ImportResult:
    """Merge the folder into the store: every file checked first (a bad one: ``InputError`` naming it), then
    conflicts (two files, or a file and a stored baseline, of one key with different content: refused, naming
    both), then in one transaction: the baselines the store lacks, the stored baselines a tombstone deletes,
    the acceptances it lacks. Importing the same folder again changes nothing."""
    from kbase.store.engine import write_transaction

    folder = read_folder(d)
    chosen: dict[tuple, tuple[str, BaselineFile]] = {}
    out = ImportResult(d.path)
    for key, files in folder.by_key().items():
        first_name, first = files[0]
        for other_name, other in files[1:]:
            if other.content != first.content:
                raise conflict(str(d.path / first_name), str(d.path / other_name), key)
        if folder.deleted(key, first.content):
            out.skipped_tombstoned += 1
            continue
        chosen[key] = (first_name, first)
    try:
        with write_transaction(st.engine, st.url) as conn:
            stored = _stored_by_key(conn, set(chosen) | set(folder.tombstones))
            doomed = [s.id for key, s in stored.items() if folder.deleted(key, s.content)]
            for key, (name, f) in chosen.items():
                s = stored.get(key)
                if s is None:
                    continue
                if s.content != f.content:
                    raise conflict(str(d.path / name), f"the store's @{s.id}", key)
            for key, (_, f) in sorted(chosen.items(), key=lambda kv: (kv[1][1].row["created_at"], kv[0])):
                if key in stored:
                    out.already += 1
                    continue
                out.added_ids.append(_insert_baseline(conn, f))
            out.added = len(out.added_ids)
            if doomed:
                _delete(conn, doomed)
            out.deleted = len(doomed)
            out.acceptances_added = _insert_acceptances(conn, list(folder.acceptances.values()))
    except KbaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - driver errors become one line; the transaction rolled back
        raise StoreError(f"store: could not import ({type(exc).__name__}: {exc})") from None
    return out


def _stored_by_key(conn: Connection, keys: set[tuple]) -> dict[tuple, Stored]:
    """The stored baselines of the given capture keys (read by commit, then matched)."""
    from sqlalchemy import select

    from kbase.store.models import BASELINE

    commits = sorted({k[1] for k in keys})
    ids: list[int] = []
    for i in range(0, len(commits), 500):
        q = select(BASELINE.c.id, *[BASELINE.c[k] for k in ("workload", "commit", "source_sha256", "window_spec",
                                                               "capture_copy")])
        for r in conn.execute(q.where(BASELINE.c.commit.in_(commits[i : i + 500]))):
            if tuple(r[1:]) in keys:
                ids.append(int(r[0]))
    return {s.key: s for s in read_stored(conn, ids).values()}


def _insert_baseline(conn: Connection, f: BaselineFile) -> int:
    from kbase.store.models import BASELINE
    from kbase.store.queries import insert_kernels, name_ids

    values = row_values(f.row)
    bid = int(conn.execute(BASELINE.insert().values(**values).returning(BASELINE.c.id)).scalar_one())
    names: list[tuple[str, str, str, str, str]] = [(n[0], n[1], n[2], n[3], n[4]) for n in f.header["names"]]
    local = name_ids(conn, names)
    levels = f.blobs["levels"]
    assert levels is not None
    ids = [local[names[i][0]] for i in _name_ids(levels)]
    ops = f.blobs["ops"]
    if ops is not None:
        from kbase.store.queries import op_ids

        op_names = [(str(k), str(o)) for k, o in f.header.get("op_names", [])]
        known = op_ids(conn, op_names)
        ops = _relabel(ops, [known[op_names[i - 1][0]] if i else 0 for i in _op_ids(ops)], "op")
    insert_kernels(conn, values["workload"], [{
        "baseline_id": bid, "format": f.header["kernels_format"], "kernels": f.header["kernels"],
        "levels": _relabel(levels, ids), "board": f.blobs["board"], "samples": f.blobs["samples"],
        "sketches": f.blobs["sketches"], "ops": ops}])
    return bid


def _insert_acceptances(conn: Connection, rows: list[dict[str, Any]]) -> int:
    from sqlalchemy import select

    from kbase.store.models import ACCEPTANCE

    have = {acceptance_bytes(dict(r._mapping)) for r in conn.execute(select(ACCEPTANCE))}
    added = 0
    for row in sorted(rows, key=lambda r: (r["created_at"], r["workload"], r["pattern"])):
        data = acceptance_bytes(row)
        if data in have:
            continue
        conn.execute(ACCEPTANCE.insert().values(**row))
        have.add(data)
        added += 1
    return added


def _delete(conn: Connection, ids: list[int]) -> None:
    from sqlalchemy import delete

    from kbase.store.models import BASELINE, BASELINE_KERNELS

    for i in range(0, len(ids), 500):
        chunk = ids[i : i + 500]
        conn.execute(delete(BASELINE_KERNELS).where(BASELINE_KERNELS.c.baseline_id.in_(chunk)))
        conn.execute(delete(BASELINE).where(BASELINE.c.id.in_(chunk)))


# ------------------------------------------------------------------------------------------ deletions


def tombstone_baselines(st: Store, ids: list[int], path: Path, delete: Callable[[], None]) -> list[str]:
    """Delete ``ids`` (``delete()``, the store's one transaction) and record it in the export folder: a tombstone
    per baseline, and the folder's files of those baselines removed. Returns the tombstones' names."""
    with OutputDir(path, "prune_export") as d:
        folder = read_folder(d, check_blobs=False)
        with st.engine.connect() as conn:
            gone = read_stored(conn, ids)
        delete()
        names = []
        for s in gone.values():
            data = tombstone_bytes(s.key, s.content)
            name = file_name(data, TOMBSTONE_SUFFIX)
            if name not in folder.tombstone_names:
                d.write(name, data)
            names.append(name)
            for fname, f in folder.baselines.items():
                if f.key == s.key and f.content == s.content:
                    d.remove(fname)
        return names
