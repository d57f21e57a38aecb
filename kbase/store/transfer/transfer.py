"""Baselines as files (``export_files``; the folder read and checked by ``export_folder``) to and from the
store: ``export`` writes what the folder lacks, ``import_folder`` merges a folder into the store in one
transaction after checking every file, and
``tombstone_baselines`` records deletions (``kbase prune --export``) so that they travel too.

Idempotence and conflicts go by the capture key (workload, commit, source sha256, window, copy: the store's
unique key) and the content digest (``export_files.content_digest``): one key, one content is the same baseline
however often it is exported or imported; one key, two contents is refused, naming both, with nothing changed.
Every file is read and written inside the folder without following a link (``safe_write.OutputDir``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbase.errors import KbaseError, StoreError
from kbase.safe_write import OutputDir
from kbase.store.transfer.export_files import (
    ACCEPTANCE_SUFFIX,
    BASELINE_SUFFIX,
    BLOBS,
    FORMAT,
    TOMBSTONE_SUFFIX,
    BaselineFile,
    acceptance_bytes,
    content_digest,
    file_name,
    jsonable_row,
    key_of,
    row_values,
    tombstone_bytes,
)
from kbase.store.transfer.export_folder import Folder, baseline_columns, conflict, file_row, read_folder, stored_row

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

    from kbase.store.engine import Store
    from kbase.store.read.reader import StoreReader

_CHUNK = 200  # baselines read at a time
IMPORT_LOCK = 0x6B62_696D  # PostgreSQL advisory lock key of `kbase import` ("kbim")


# ------------------------------------------------------------------------------------------ reading the store


@dataclass
class Stored:
    """One stored baseline in export terms: its row, its kernels' names by row, its op list, its blobs (the bytes
    stored), its digest."""

    id: int
    row: dict[str, Any]
    names: list[tuple[str, str, str, str, str]]  # (name, family, short name, category, tc) by row
    op_names: list[list[str]]  # [key, op] by position in the ops blob
    blobs: dict[str, bytes | None]
    kernels: int
    content: str

    @property
    def key(self) -> tuple:
        return key_of(self.row)

    def file(self) -> BaselineFile:
        from kbase.store.codec.kernel_blobs import FORMAT as KERNELS_FORMAT

        header = {"format": FORMAT, "baseline": jsonable_row(self.row), "names": [list(n) for n in self.names],
                  "kernels_format": KERNELS_FORMAT, "kernels": self.kernels, "content": self.content}
        if self.blobs["ops"] is not None:
            header["op_names"] = self.op_names
        return BaselineFile(header, dict(self.blobs))


def read_stored(reader: StoreReader, ids: list[int]) -> dict[int, Stored]:
    """The given baselines as ``Stored`` (kernel tables, names and content digests), read by the store's reader."""
    import dataclasses

    from kbase.store.codec.id_lists import ids_of
    from kbase.store.codec.kernel_blobs import empty_table, encode

    cols = baseline_columns()
    out: dict[int, Stored] = {}
    for i in range(0, len(ids), _CHUNK):
        chunk = ids[i : i + _CHUNK]
        rows = {b.id: dataclasses.asdict(b) for b in reader.baselines_by_id(chunk)}
        tables = reader.kernel_rows(chunk)
        kernel_ids = {bid: ids_of(t["kernel_ids"]) for bid, t in tables.items()}
        op_ids = {bid: ids_of(t["op_ids"]) for bid, t in tables.items()}
        used = sorted({n for v in kernel_ids.values() for n in v})
        names = {r[0]: (r[1], r[5], r[2], r[3], r[4]) for r in reader.names_by_id(used)}  # name, family, short, ...
        used_ops = sorted({o for v in op_ids.values() for o in v})
        ops = {i: [key, op] for i, (key, op) in reader.op_names(used_ops).items()}
        for bid in chunk:
            if bid not in rows:
                continue
            row = file_row({c: rows[bid][c] for c in cols})
            t = tables.get(bid)
            if t is not None:
                blobs = {b: (bytes(t[b]) if t[b] is not None else None) for b in BLOBS}
            else:  # no kernel table stored: the empty one
                e = encode(empty_table())
                blobs = {"levels": e.levels, "board": e.board, "samples": e.samples, "sketches": e.sketches,
                         "ops": None}
            listed = [names[n] for n in kernel_ids.get(bid, [])]
            op_names = [ops[o] for o in op_ids.get(bid, [])]
            out[bid] = Stored(bid, row, listed, op_names, blobs, len(listed),
                              content_digest(row, [n[0] for n in listed], blobs, op_names))
    return out


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
    import dataclasses

    folder = read_folder(d, check_blobs=False)  # (what this export compares with: keys and contents)
    present = {f.key: (name, f.content) for name, f in sorted(folder.baselines.items(), reverse=True)}
    out = ExportResult(d.path)
    plan: list[tuple[str, bytes]] = []
    ids = st.reader.baseline_ids(workload)
    for i in range(0, len(ids), _CHUNK):
        for s in read_stored(st.reader, ids[i : i + _CHUNK]).values():
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
    for a in st.reader.list_acceptances(workload):
        out.acceptances += 1
        data = acceptance_bytes(dataclasses.asdict(a))
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
    # tombstones not applied because prune's keep rules keep their baseline: (the baseline, why kept)
    refused_tombstones: list[tuple[str, str]] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"<ImportResult {self.added} added, {self.already} already stored, {self.deleted} deleted>"


KeptBy = Callable[[str, str, str], "str | None"]  # (workload, commit, branch) -> why prune keeps it, or None


def import_folder(st: Store, folder: Folder, kept_by: KeptBy) -> ImportResult:
    """Merge a folder, every file of it read and checked (``read_folder``: a bad one is an ``InputError``
    naming it, before the store is opened), into the store: conflicts (two files, or a file and a stored
    baseline, of one key with different content: refused, naming both), then in one transaction: the
    baselines the store lacks, the stored baselines a tombstone deletes, the acceptances it lacks. A tombstone
    of a baseline that ``kept_by`` keeps (prune's keep rules) is not applied, and listed. Importing the same
    folder again changes nothing."""
    from kbase.store.engine import write_transaction

    chosen: dict[tuple, tuple[str, BaselineFile]] = {}
    out = ImportResult(folder.path)

    def tombstoned(key: tuple, content: str, row: dict[str, Any]) -> bool:
        if not folder.deleted(key, content):
            return False
        why = kept_by(row["workload"], row["commit"], row.get("branch") or "")
        if why:
            out.refused_tombstones.append((_describe(key), why))
        return not why

    for key, files in folder.by_key().items():
        first_name, first = files[0]
        for other_name, other in files[1:]:
            if other.content != first.content:
                raise conflict(str(folder.path / first_name), str(folder.path / other_name), key)
        if tombstoned(key, first.content, first.row):
            out.skipped_tombstoned += 1
            continue
        chosen[key] = (first_name, first)
    current = ""  # the file being inserted: a store's refusal names it
    try:
        with write_transaction(st.engine, st.url) as conn:
            if conn.dialect.name == "postgresql":  # imports one at a time (SQLite: BEGIN IMMEDIATE does it): two
                # at once both found a baseline missing and raced to insert it (a duplicate-key error)
                conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({IMPORT_LOCK})")
            stored = _stored_by_key(st.reader, set(chosen) | set(folder.tombstones))
            doomed = [s.id for key, s in stored.items() if key not in chosen and tombstoned(key, s.content, s.row)]
            for key, (name, f) in chosen.items():
                s = stored.get(key)
                if s is None:
                    continue
                if s.content != f.content:
                    raise conflict(str(folder.path / name), f"the store's @{s.id}", key)
            for key, (name, f) in sorted(chosen.items(), key=lambda kv: (kv[1][1].row["created_at"], kv[0])):
                if key in stored:
                    out.already += 1
                    continue
                current = name
                out.added_ids.append(_insert_baseline(conn, f))
            current = ""
            out.added = len(out.added_ids)
            if doomed:
                _delete(conn, doomed)
            out.deleted = len(doomed)
            out.acceptances_added = _insert_acceptances(conn, st.reader, list(folder.acceptances.values()))
    except KbaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - driver errors become one line; the transaction rolled back
        what = f" {folder.path / current}" if current else ""
        raise StoreError(f"store: could not import{what} ({type(exc).__name__}: {exc}); nothing was changed") from None
    return out


def _describe(key: tuple) -> str:
    workload, commit, sha, window, copy = key
    return f"workload {workload!r}, commit {commit[:12]}, capture {sha[:12]}, window {window!r}, copy {copy}"


def _stored_by_key(reader: StoreReader, keys: set[tuple]) -> dict[tuple, Stored]:
    """The stored baselines of the given capture keys (read by commit, then matched). Read by the store's reader,
    outside the import's transaction: what was committed, which no other import changes while it holds the
    import lock (SQLite's write lock, PostgreSQL's advisory one)."""
    ids = [int(r[0]) for r in reader.capture_keys([k[1] for k in keys]) if tuple(r[1:]) in keys]
    return {s.key: s for s in read_stored(reader, ids).values()}


def _insert_baseline(conn: Connection, f: BaselineFile) -> int:
    """The file's baseline row, and its kernel table by the one writer: the blobs as they are in the file."""
    from kbase.store.codec.kernel_blobs import Blobs, StoredTable
    from kbase.store.schema.models import BASELINE
    from kbase.store.write.queries import write_kernels

    values = row_values(stored_row(f.row))
    bid = int(conn.execute(BASELINE.insert().values(**values).returning(BASELINE.c.id)).scalar_one())
    b = f.blobs
    assert b["levels"] is not None and b["board"] is not None
    table = StoredTable(Blobs(b["levels"], b["board"], b["samples"], b["sketches"]), b["ops"],
                        [(n[0], n[1], n[2], n[3], n[4]) for n in f.header["names"]],
                        [(str(k), str(o)) for k, o in f.header.get("op_names", [])])
    write_kernels(conn, values["workload"], [(bid, table)])
    return bid


def _insert_acceptances(conn: Connection, reader: StoreReader, rows: list[dict[str, Any]]) -> int:
    import dataclasses

    from kbase.store.schema.models import ACCEPTANCE

    have = {acceptance_bytes(dataclasses.asdict(a)) for a in reader.list_acceptances()}
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

    from kbase.store.schema.models import BASELINE, BASELINE_KERNELS

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
        gone = read_stored(st.reader, ids)
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
