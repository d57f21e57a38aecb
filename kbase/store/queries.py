"""Reading and writing baselines: SQLAlchemy Core over the SQLModel tables, one function per question.

Writes are single transactions (``write_transaction``): a baseline and all its rows, or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from sqlalchemy import Select, delete, func, or_, select

from kbase.errors import InputError, KbaseError, StoreError
from kbase.store.codec import baseline_row, kernel_naming, kernel_rows, leaderboard_from_rows, name_hash
from kbase.store.engine import write_transaction
from kbase.store.frames import KERNEL_COLUMNS, kernels_frame
from kbase.store.models import ACCEPTANCE, BASELINE, BASELINE_KERNEL, KERNEL_NAME, Acceptance, Baseline

if TYPE_CHECKING:
    import pandas as pd
    from sqlalchemy.engine import Connection, Engine

    from kbase.analysis.leaderboard import Leaderboard
    from kbase.gitrepo import CommitInfo
    from kbase.readers.source import SourceInfo

_NAME_CHUNK = 400


def name_ids(conn: Connection, kernels: list[tuple[str, str, str, str, str]]) -> dict[str, int]:
    """Ids of the kernel names, inserting those not yet known (race-safe upsert). ``kernels``: (name, family,
    short name, category, tc) of each kernel (``codec.kernel_naming``); a repeated name keeps its first."""
    from sqlalchemy.dialects.postgresql import insert as pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    insert: Any = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    kn = KERNEL_NAME
    first = {k[0]: k for k in reversed(kernels)}  # (reversed: the first of a repeated name wins)
    rows = [
        {
            "name_hash": name_hash(name),
            "name": name,
            "family_hash": name_hash(family),
            "family": family,
            "short_name": short,
            "category": category,
            "tc": tc,
        }
        for name, family, short, category, tc in first.values()
    ]
    # One global insert order: two writers adding overlapping new names in different (leaderboard)
    # orders would each wait on the other's uncommitted row — a deadlock on PostgreSQL.
    rows.sort(key=lambda row: row["name_hash"])
    ids: dict[str, int] = {}
    by_hash = {row["name_hash"]: row["name"] for row in rows}
    for i in range(0, len(rows), _NAME_CHUNK):
        chunk = rows[i : i + _NAME_CHUNK]
        hashes = [row["name_hash"] for row in chunk]
        # Known names are only looked up: the insert (and its per-row parameter processing) is paid
        # for new names only, which after the first baseline of a workload is almost none.
        found = dict(conn.execute(select(kn.c.name_hash, kn.c.id).where(kn.c.name_hash.in_(hashes))).all())
        missing = [row for row in chunk if row["name_hash"] not in found]
        if missing:
            conn.execute(insert(kn).on_conflict_do_nothing(index_elements=["name_hash"]), missing)
            new = [row["name_hash"] for row in missing]
            found.update(conn.execute(select(kn.c.name_hash, kn.c.id).where(kn.c.name_hash.in_(new))).all())
        for h, nid in found.items():
            ids[by_hash[h]] = nid
    return ids


def insert_kernels(conn: Connection, rows: list[dict], chunk: int = 2000) -> None:
    bk = BASELINE_KERNEL
    for i in range(0, len(rows), chunk):
        conn.execute(bk.insert(), rows[i : i + chunk])


CAPTURE_KEY = ("workload", "commit", "source_sha256", "window_spec", "capture_copy")


@dataclass(frozen=True)
class Saved:
    baseline: Baseline
    created: bool  # False: this capture was already stored at this commit (the stored row is returned)


def save_leaderboard(engine: Engine, lb: Leaderboard, *, workload: str, commit: CommitInfo, source: SourceInfo,
                     window_spec: str, tags: list[str] | None = None, note: str = "", url: str = "",
                     force: bool = False) -> Saved:
    """Store one leaderboard as a baseline, atomically and at most once per capture: the unique capture
    key (workload, commit, sha256, window, copy) decides, so concurrent identical snapshots store one row.
    ``force`` stores another copy (the next copy number) of a capture already stored."""
    base = baseline_row(lb, workload=workload, commit=commit, source=source, window_spec=window_spec, tags=tags,
                        note=note)
    values = base.model_dump(exclude={"id"})
    keys = [int(k) for k in lb.summary.iteration_keys]
    try:
        with write_transaction(engine, url) as conn:
            for _ in range(20):  # a concurrent --force took this copy number: take the next
                values["capture_copy"] = _next_copy(conn, values) if force else 0
                baseline_id = conn.execute(_insert_ignoring_duplicate(conn, values)).scalar()
                if baseline_id is not None or not force:
                    break
            if baseline_id is None:
                existing = _same_capture(conn, values)
                if existing is None or force:
                    raise StoreError("store: the capture key is taken but its row cannot be read; try again")
                return Saved(existing, created=False)
            insert_kernels(conn, kernel_rows(baseline_id, lb, name_ids(conn, kernel_naming(lb)), keys))
    except KbaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - driver errors become one line; the transaction rolled back
        raise StoreError(f"store: could not save the baseline ({type(exc).__name__}: {exc})") from None
    base.id = baseline_id
    base.capture_copy = values["capture_copy"]
    return Saved(base, created=True)


def _capture_where(values: dict[str, Any]) -> list[Any]:
    return [BASELINE.c[k] == values[k] for k in CAPTURE_KEY[:-1]]


def _next_copy(conn: Connection, values: dict[str, Any]) -> int:
    top = conn.execute(select(func.max(BASELINE.c.capture_copy)).where(*_capture_where(values))).scalar()
    return 0 if top is None else int(top) + 1


def _insert_ignoring_duplicate(conn: Connection, values: dict[str, Any]) -> Any:
    from sqlalchemy.dialects.postgresql import insert as pg_insert
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    insert: Any = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    return (insert(BASELINE).values(**values).on_conflict_do_nothing(index_elements=list(CAPTURE_KEY))
            .returning(BASELINE.c.id))


def _same_capture(conn: Connection, values: dict[str, Any]) -> Baseline | None:
    res = conn.execute(select(BASELINE).where(*_capture_where(values), BASELINE.c.capture_copy == 0))
    row = res.fetchone()
    return Baseline(**dict(zip(res.keys(), row))) if row is not None else None


def _baselines(engine: Engine, query: Select) -> list[Baseline]:
    """Baseline models from a Core query over the baseline table (no ORM session: rows are read-only)."""
    with engine.connect() as conn:
        res = conn.execute(query)
        keys = list(res.keys())
        return [Baseline(**dict(zip(keys, row))) for row in res.fetchall()]


def find_duplicate(engine: Engine, workload: str, commit: str, sha256: str, window_spec: str) -> Baseline | None:
    bt = BASELINE.c
    q = select(BASELINE).where(bt.workload == workload, bt.commit == commit, bt.source_sha256 == sha256,
                               bt.window_spec == window_spec).limit(1)
    found = _baselines(engine, q)
    return found[0] if found else None


def find_by_identity(engine: Engine, commit: str, size: int, mtime_ns: int, probe: str, window_spec: str,
                     kbase_version: str, workload: str | None = None) -> Baseline | None:
    """The newest baseline of this file (same size, mtime and probe hash) at ``commit`` on this window,
    written by this kbase version, or None: the cheap identity check of ``kbase top FILE``."""
    bt = BASELINE.c
    q = select(BASELINE).where(bt.commit == commit, bt.source_probe == probe, bt.source_size == size,
                               bt.source_mtime_ns == mtime_ns, bt.window_spec == window_spec,
                               bt.kbase_version == kbase_version)
    if workload:
        q = q.where(bt.workload == workload)
    found = _baselines(engine, q.order_by(bt.id.desc()).limit(1))
    return found[0] if found else None


def list_baselines(engine: Engine, workload: str | None = None, branch: str | None = None,
                   commit_prefix: str | None = None, limit: int | None = None) -> list[Baseline]:
    """Baselines, newest first, optionally filtered."""
    bt = BASELINE.c
    q = select(BASELINE)
    if workload:
        q = q.where(bt.workload == workload)
    if branch:
        q = q.where(bt.branch == branch)
    if commit_prefix:
        q = q.where(bt.commit.startswith(commit_prefix.lower(), autoescape=True))
    q = q.order_by(bt.created_at.desc(), bt.id.desc())
    if limit:
        q = q.limit(limit)
    return _baselines(engine, q)


def get_baseline(engine: Engine, baseline_id: int) -> Baseline:
    found = _baselines(engine, select(BASELINE).where(BASELINE.c.id == baseline_id))
    if not found:
        raise InputError("no such baseline in the store", field="ref", value=f"@{baseline_id}")
    return found[0]


def baselines_at(engine: Engine, workload: str, commits: list[str]) -> dict[str, list[Baseline]]:
    """Baselines of ``workload`` at each of ``commits`` (full hashes), oldest first per commit."""
    out: dict[str, list[Baseline]] = {}
    if not commits:
        return out
    bt = BASELINE.c
    q = select(BASELINE).where(bt.workload == workload, bt.commit.in_(commits)).order_by(bt.id)
    for b in _baselines(engine, q):
        out.setdefault(b.commit, []).append(b)
    return out


def load_kernels(engine: Engine, baseline_ids: list[int]) -> pd.DataFrame:
    """Kernel rows of the given baselines joined with their names (one query)."""
    return kernels_frame(load_kernel_rows(engine, baseline_ids), list(KERNEL_COLUMNS))


def load_kernel_rows(engine: Engine, baseline_ids: list[int]) -> list[tuple]:
    """``load_kernels``' rows as plain tuples (``frames.KERNEL_COLUMNS`` order: the model's columns, then
    the name columns), no DataFrame."""
    bk, kn = BASELINE_KERNEL, KERNEL_NAME
    q = (
        select(bk, kn.c.name, kn.c.family, kn.c.short_name, kn.c.category, kn.c.tc)
        .join(kn, kn.c.id == bk.c.name_id)
        .where(bk.c.baseline_id.in_(baseline_ids))
        .order_by(bk.c.baseline_id, bk.c.rank)
    )
    with engine.connect() as conn:
        # plain tuples: pandas probes each Row object for ``_fields`` etc. (~2x slower)
        return [tuple(r) for r in conn.execute(q).fetchall()]


def load_leaderboard(engine: Engine, baseline_id: int) -> Leaderboard:
    """The stored Leaderboard of a baseline, as ``build_leaderboard`` made it."""
    return leaderboard_from_rows(get_baseline(engine, baseline_id), load_kernels(engine, [baseline_id]))


def delete_baseline(engine: Engine, baseline_id: int, url: str = "") -> None:
    get_baseline(engine, baseline_id)
    with write_transaction(engine, url) as conn:
        conn.execute(delete(BASELINE_KERNEL).where(BASELINE_KERNEL.c.baseline_id == baseline_id))
        conn.execute(delete(BASELINE).where(BASELINE.c.id == baseline_id))


def kernel_names(engine: Engine, workload: str | None = None) -> tuple[list[str], list[str]]:
    """The full and short names of the kernels stored (in baselines of ``workload`` when given)."""
    bk, kn, bt = BASELINE_KERNEL, KERNEL_NAME, BASELINE
    q = select(kn.c.name, kn.c.short_name).order_by(kn.c.id)
    if workload:
        used = select(bk.c.name_id).join(bt, bt.c.id == bk.c.baseline_id).where(bt.c.workload == workload)
        q = q.where(kn.c.id.in_(used))
    with engine.connect() as conn:
        rows = conn.execute(q).fetchall()
    return [r[0] for r in rows], [r[1] for r in rows]


@dataclass(frozen=True)
class HistoryRows:
    """One kernel across baselines as plain rows (no pandas): ``columns`` names each tuple's fields."""

    columns: list[str]
    rows: list[tuple]

    def records(self) -> list[dict[str, Any]]:
        return [dict(zip(self.columns, r)) for r in self.rows]


def kernel_history_rows(engine: Engine, name: str, workload: str | None = None,
                        branch: str | None = None) -> HistoryRows:
    """One kernel across all baselines (oldest first): id, commit, created_at, workload, count, total_ns,
    avg_ns, per_iter_ns, share_window. Plain tuples: ``kbase history`` renders them without pandas."""
    bk, kn, bt = BASELINE_KERNEL, KERNEL_NAME, BASELINE
    q = (
        select(bt.c.id, bt.c.commit, bt.c.created_at, bt.c.workload, bt.c.branch, bk.c.count, bk.c.total_ns,
               bk.c.avg_ns, bk.c.per_iter_ns, bk.c.share_window)
        .join(bk, bk.c.baseline_id == bt.c.id)
        .join(kn, kn.c.id == bk.c.name_id)
        .where(kn.c.name_hash == name_hash(name))
        .order_by(bt.c.created_at, bt.c.id)
    )
    if workload:
        q = q.where(bt.c.workload == workload)
    if branch:
        q = q.where(bt.c.branch == branch)
    with engine.connect() as conn:
        res = conn.execute(q)
        return HistoryRows(columns=list(res.keys()), rows=[tuple(r) for r in res.fetchall()])


def add_acceptance(engine: Engine, row: Acceptance, url: str = "") -> Acceptance:
    """Store an acknowledged regression; returns it with its id."""
    with write_transaction(engine, url) as conn:
        row.id = conn.execute(ACCEPTANCE.insert().values(**row.model_dump(exclude={"id"}))
                              .returning(ACCEPTANCE.c.id)).scalar_one()
    return row


def _acceptances(engine: Engine, query: Select) -> list[Acceptance]:
    with engine.connect() as conn:
        res = conn.execute(query)
        keys = list(res.keys())
        return [Acceptance(**dict(zip(keys, row))) for row in res.fetchall()]


def list_acceptances(engine: Engine, workload: str | None = None, active_on: date | None = None) -> list[Acceptance]:
    """Acceptances, oldest first; of one workload, and only those unexpired on ``active_on``, when given."""
    at = ACCEPTANCE.c
    q = select(ACCEPTANCE)
    if workload:
        q = q.where(at.workload == workload)
    if active_on is not None:
        q = q.where(or_(at.expires.is_(None), at.expires >= active_on))
    return _acceptances(engine, q.order_by(at.id))


def delete_acceptance(engine: Engine, acceptance_id: int, url: str = "") -> Acceptance:
    """Revoke one acceptance; returns what was removed."""
    found = _acceptances(engine, select(ACCEPTANCE).where(ACCEPTANCE.c.id == acceptance_id))
    if not found:
        raise InputError("no such acceptance in the store", field="acceptance", value=acceptance_id)
    with write_transaction(engine, url) as conn:
        conn.execute(delete(ACCEPTANCE).where(ACCEPTANCE.c.id == acceptance_id))
    return found[0]


def line_baselines(engine: Engine, workload: str, *, fingerprint: str | None = None, commits: list[str] | None = None,
                   before_id: int | None = None, limit: int = 20) -> list[Baseline]:
    """The newest ``limit`` baselines of ``workload`` (with ``fingerprint``, at ``commits`` — a branch's
    first-parent line — and no newer than baseline ``before_id`` when given), oldest first by line
    position (commits given nearest first), then by creation."""
    bt = BASELINE.c
    q = select(BASELINE).where(bt.workload == workload)
    if fingerprint:
        q = q.where(bt.fingerprint == fingerprint)
    if before_id is not None:
        q = q.where(bt.id <= before_id)
    if commits is not None:
        if not commits:
            return []
        pos = {c: i for i, c in enumerate(commits)}
        found: list[Baseline] = []
        for i in range(0, len(commits), _NAME_CHUNK):
            found += _baselines(engine, q.where(bt.commit.in_(commits[i : i + _NAME_CHUNK])))
        found.sort(key=lambda b: (-pos[b.commit], b.created_at, b.id or 0))
        return found[-limit:] if limit else found
    newest = _baselines(engine, q.order_by(bt.created_at.desc(), bt.id.desc()).limit(limit))
    return newest[::-1]


def level_rows(engine: Engine, baseline_ids: list[int]) -> list[tuple]:
    """(baseline_id, name, short_name, per_iter_ns) of every kernel row of the given baselines."""
    bk, kn = BASELINE_KERNEL, KERNEL_NAME
    rows: list[tuple] = []
    with engine.connect() as conn:
        for i in range(0, len(baseline_ids), _NAME_CHUNK):
            q = (select(bk.c.baseline_id, kn.c.name, kn.c.short_name, bk.c.per_iter_ns)
                 .join(kn, kn.c.id == bk.c.name_id).where(bk.c.baseline_id.in_(baseline_ids[i : i + _NAME_CHUNK])))
            rows += [tuple(r) for r in conn.execute(q).fetchall()]
    return rows


class EngineReader:
    """``reader.StoreReader`` over these queries (any store SQLAlchemy opens)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def baseline(self, baseline_id: int) -> Baseline:
        return get_baseline(self.engine, baseline_id)

    def baselines_at(self, workload: str, commits: list[str]) -> dict[str, list[Baseline]]:
        return baselines_at(self.engine, workload, commits)

    def line_baselines(self, workload: str, *, fingerprint: str | None = None, commits: list[str] | None = None,
                       before_id: int | None = None, limit: int = 20) -> list[Baseline]:
        return line_baselines(self.engine, workload, fingerprint=fingerprint, commits=commits, before_id=before_id,
                              limit=limit)

    def kernel_rows(self, baseline_ids: list[int]) -> list[tuple]:
        return load_kernel_rows(self.engine, baseline_ids)

    def level_rows(self, baseline_ids: list[int]) -> list[tuple]:
        return level_rows(self.engine, baseline_ids)

    def list_acceptances(self, workload: str | None = None, active_on: date | None = None) -> list[Acceptance]:
        return list_acceptances(self.engine, workload, active_on)
