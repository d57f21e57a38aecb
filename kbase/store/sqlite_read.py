"""The read-only SQLite path: ``kbase list``, ``show @ID``, ``history``, and the store reads of ``diff`` and
``gate`` (``reader.StoreReader``) on Python's own ``sqlite3``.

Why: importing SQLAlchemy and SQLModel costs ~0.4-0.6 s (pandas another ~0.6 s), more than the whole
answer of these commands on a store of 10,000 baselines. SQLModel and Alembic stay the schema's source of
truth: this path reads only a store that already is exactly at the head revision (``HEAD_REVISION``) and
holds only kbase's own tables (the rule of ``guard``), through a read-only connection (``mode=ro``:
nothing is created, migrated or written). In every other case — no store, a foreign database, an older
or newer schema, PostgreSQL, in-memory SQLite, a URL with options, a file that is locked or cannot be
read — ``read_only`` returns None and the caller takes the SQLAlchemy path, with its messages and exit
codes. Each query mirrors one of ``queries``; tests keep both paths' answers identical.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from array import array
from collections.abc import Callable
from datetime import date
from typing import TYPE_CHECKING, Any, TypeVar

from kbase.errors import InputError
from kbase.store.guard import _sqlite_tables
from kbase.store.readonly import connect_store
from kbase.store.records import (  # noqa: F401 - BASELINE_FIELDS, Unreadable: re-exported (their home before)
    BASELINE_FIELDS,
    AcceptanceRecord,
    BaselineRecord,
    Unreadable,
    acceptance_record,
    baseline_record,
    utc_datetime,
)
from kbase.store.schema_names import HEAD_REVISION, OWN_TABLES, SQLITE_INTERNAL_TABLES, name_hash
from kbase.store.urls import sqlite_path

if TYPE_CHECKING:

    from kbase.render.board import LeaderboardRows

T = TypeVar("T")


# Literal SQL (none is built at run time; every value is a bound parameter, a list of ids or commits one
# JSON array read by ``json_each``); tests keep the column lists equal to the models'.
_SELECT_BASELINE = (
    'SELECT "id", "created_at", "workload", "commit", "commit_date", "branch", "detached", "dirty", '
    '"source_name", "source_sha256", "source_size", "source_format", "source_mtime_ns", "source_probe", '
    '"exporter_version", "gpu_models", "gpu_count", "host", "window_spec", "window_desc", "marker", '
    '"aligned", "warmup_skipped", "iterations_used", "iteration_keys", "window_ns", "window_gpu_ns", '
    '"total_kernel_ns", "compute_ns", "communication_ns", "memory_ns", "step_wall_ns", "fingerprint", '
    '"summary_json", "kbase_version", "capture_copy", "tags", "note" FROM baseline '
)
_GET_BASELINE = _SELECT_BASELINE + "WHERE id = ?"
_LIST_BASELINES = (
    _SELECT_BASELINE + "WHERE (? = 0 OR workload = ?) AND (? = 0 OR branch = ?) AND (? = 0 OR \"commit\" LIKE ? "
    "ESCAPE '/') ORDER BY created_at DESC, id DESC LIMIT ?"
)
_BASELINES_AT = _SELECT_BASELINE + 'WHERE workload = ? AND "commit" IN (SELECT value FROM json_each(?)) ORDER BY id'
_LINE_WHERE = "WHERE workload = ? AND (? = 0 OR fingerprint = ?) AND (? = 0 OR id <= ?) "
_LINE_AT = _SELECT_BASELINE + _LINE_WHERE + 'AND "commit" IN (SELECT value FROM json_each(?))'
_LINE_NEWEST = _SELECT_BASELINE + _LINE_WHERE + "ORDER BY created_at DESC, id DESC LIMIT ?"
# ``frames.KERNEL_COLUMNS``, in order
_LOAD_KERNELS = (
    "SELECT bk.id, bk.baseline_id, bk.name_id, bk.rank, bk.gpus, bk.count, bk.total_ns, bk.avg_ns, bk.median_ns, "
    "bk.min_ns, bk.max_ns, bk.std_ns, bk.per_iter_ns, bk.count_per_iter, bk.share_window, bk.share_kernel, "
    "bk.amdahl_ceiling, bk.fragmented, bk.iter_ns, bk.iter_count, bk.launch_sketch, kn.name, kn.family, "
    "kn.short_name, kn.category, kn.tc FROM baseline_kernel bk JOIN kernel_name kn ON kn.id = bk.name_id "
    "WHERE bk.baseline_id IN (SELECT value FROM json_each(?)) ORDER BY bk.baseline_id, bk.rank"
)
_FRAGMENTED = 17  # the one Boolean column of _LOAD_KERNELS: SQLAlchemy returns bool, sqlite3 0/1
_KERNEL_LEVELS = (
    "SELECT bk.baseline_id, kn.name, kn.short_name, bk.per_iter_ns FROM baseline_kernel bk JOIN kernel_name kn "
    "ON kn.id = bk.name_id WHERE bk.baseline_id IN (SELECT value FROM json_each(?))"
)
_ACCEPTANCES = (
    'SELECT "id", "workload", "pattern", "commit", "reason", "author", "created_at", "expires" FROM acceptance '
    "WHERE (? = 0 OR workload = ?) AND (? = 0 OR expires IS NULL OR expires >= ?) ORDER BY id"
)


def _float(v: Any) -> float:
    return float("nan") if v is None else float(v)


def _floats(blob: Any) -> array:
    """A stored little-endian float32 array (``codec.unpack``) as Python floats."""
    a = array("f")
    if blob:
        if not isinstance(blob, bytes) or len(blob) % 4:
            raise Unreadable("per-iteration samples are not float32 arrays")
        a.frombytes(blob)
        if sys.byteorder == "big":
            a.byteswap()
    return a


class SqliteReader:
    """Queries of one read-only connection; each mirrors the ``queries`` function of the same name."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def close(self) -> None:
        self.conn.close()

    def list_baselines(self, workload: str | None = None, branch: str | None = None,
                       commit_prefix: str | None = None, limit: int | None = None) -> list[BaselineRecord]:
        # SQLAlchemy's startswith(autoescape=True): LIKE with '/' escaping; every filter is a bound parameter
        escaped = (commit_prefix or "").lower().replace("/", "//").replace("%", "/%").replace("_", "/_")
        args = [bool(workload), workload or "", bool(branch), branch or "", bool(commit_prefix), escaped + "%",
                limit or -1]
        return [baseline_record(r) for r in self.conn.execute(_LIST_BASELINES, args).fetchall()]

    def find_by_identity(self, commit: str, probe: str, size: int, mtime_ns: int, window_spec: str,
                         kbase_version: str) -> int | None:
        """``queries.find_by_identity``'s id (any workload): the newest baseline of this very file."""
        row = self.conn.execute('SELECT id FROM baseline WHERE "commit" = ? AND source_probe = ? AND source_size = ? '
                                "AND source_mtime_ns = ? AND window_spec = ? AND kbase_version = ? "
                                "ORDER BY id DESC LIMIT 1",
                                (commit, probe, size, mtime_ns, window_spec, kbase_version)).fetchone()
        return int(row[0]) if row else None

    def get_baseline(self, baseline_id: int) -> BaselineRecord | None:
        row = self.conn.execute(_GET_BASELINE, (baseline_id,)).fetchone()
        return baseline_record(row) if row is not None else None

    def kernel_names(self, workload: str | None = None) -> tuple[list[str], list[str]]:
        if workload:
            rows = self.conn.execute(
                "SELECT name, short_name FROM kernel_name WHERE id IN (SELECT bk.name_id FROM baseline_kernel bk "
                "JOIN baseline b ON b.id = bk.baseline_id WHERE b.workload = ?) ORDER BY id", (workload,)).fetchall()
        else:
            rows = self.conn.execute("SELECT name, short_name FROM kernel_name ORDER BY id").fetchall()
        return [r[0] for r in rows], [r[1] for r in rows]

    def kernel_history_rows(self, name: str, workload: str | None = None,
                            branch: str | None = None) -> list[dict[str, Any]]:
        """``queries.kernel_history_rows(...).records()``: one kernel across baselines, oldest first."""
        cols = ["id", "commit", "created_at", "workload", "branch", "count", "total_ns", "avg_ns", "per_iter_ns",
                "share_window"]
        args = [name_hash(name), bool(workload), workload or "", bool(branch), branch or ""]
        out = []
        for r in self.conn.execute(KERNEL_HISTORY_SQL, args).fetchall():
            rec = dict(zip(cols, r))
            rec["created_at"] = utc_datetime(rec["created_at"])
            out.append(rec)
        return out

    def leaderboard(self, b: BaselineRecord) -> LeaderboardRows:
        """``queries.load_leaderboard`` as rows: each value as the DataFrame path's records hold it (NULL
        per-iteration figures NaN, a NULL Amdahl ceiling infinite)."""
        from kbase.analysis.summary import COLUMNS, LeaderboardSummary
        from kbase.render.board import LeaderboardRows, bounds_from_samples

        sql = ("SELECT bk.gpus, bk.count, bk.total_ns, bk.avg_ns, bk.median_ns, bk.min_ns, bk.max_ns, bk.std_ns, "
               "bk.per_iter_ns, bk.count_per_iter, bk.share_window, bk.share_kernel, bk.amdahl_ceiling, "
               "bk.fragmented, kn.name, kn.short_name, kn.family, kn.category, kn.tc, bk.iter_ns, bk.iter_count "
               "FROM baseline_kernel bk JOIN kernel_name kn ON kn.id = bk.name_id WHERE bk.baseline_id = ? "
               "ORDER BY bk.rank")
        raw = self.conn.execute(sql, (b.id,)).fetchall()
        rows: list[dict[str, Any]] = []
        blobs: list[tuple[str, Any, Any]] = []
        # A share column that is NULL in every row stays None (pandas keeps an all-None column as objects).
        shares_null = [all(r[i] is None for r in raw) for i in (10, 11)]
        inf = float("inf")
        for (gpus, count, total, avg, med, lo, hi, std, per_iter, cpi, share_w, share_k, amdahl, frag, name, short,
             family, cat, tc, iter_ns, iter_count) in raw:
            values = {"name": name, "short_name": short, "family": family, "category": cat, "tc": tc, "gpus": gpus,
                      "count": count, "total_ns": total, "avg_ns": float(avg), "median_ns": float(med),
                      "min_ns": lo, "max_ns": hi, "std_ns": float(std), "per_iter_ns": _float(per_iter),
                      "count_per_iter": _float(cpi),
                      "share_window": share_w if shares_null[0] else _float(share_w),
                      "share_kernel": share_k if shares_null[1] else _float(share_k),
                      "amdahl_ceiling": inf if amdahl is None else float(amdahl), "fragmented": bool(frag)}
            rows.append({c: values[c] for c in COLUMNS})
            blobs.append((name, iter_ns, iter_count))
        try:
            summary: dict[str, Any] = json.loads(b.summary_json)
            keys = [int(k) for k in json.loads(b.iteration_keys)]
        except (ValueError, TypeError):
            raise Unreadable("summary or iteration keys are not JSON") from None
        notes = summary.pop("notes", [])
        lb_summary = LeaderboardSummary.from_dict(summary)

        def bounds() -> dict[str, tuple[float, float]]:
            return bounds_from_samples(_samples(blobs, keys), lb_summary)

        return LeaderboardRows(columns=list(COLUMNS), rows=rows, summary=lb_summary, notes=notes, bounds=bounds)


    # The reads of ``diff`` and ``gate`` (``reader.StoreReader``), each as the ``queries`` function of that name.

    def baseline(self, baseline_id: int) -> BaselineRecord:
        found = self.get_baseline(baseline_id)
        if found is None:
            raise InputError("no such baseline in the store", field="ref", value=f"@{baseline_id}")
        return found

    def baselines_at(self, workload: str, commits: list[str]) -> dict[str, list[BaselineRecord]]:
        out: dict[str, list[BaselineRecord]] = {}
        if not commits:
            return out
        for row in self.conn.execute(_BASELINES_AT, (workload, json.dumps(commits))).fetchall():
            b = baseline_record(row)
            out.setdefault(b.commit, []).append(b)
        return out

    def line_baselines(self, workload: str, *, fingerprint: str | None = None, commits: list[str] | None = None,
                       before_id: int | None = None, limit: int = 20) -> list[BaselineRecord]:
        args: list[Any] = [workload, bool(fingerprint), fingerprint or "", before_id is not None, before_id or 0]
        if commits is not None:
            if not commits:
                return []
            pos = {c: i for i, c in enumerate(commits)}
            found = [baseline_record(r) for r in self.conn.execute(_LINE_AT, [*args, json.dumps(commits)]).fetchall()]
            found.sort(key=lambda b: (-pos[b.commit], b.created_at, b.id or 0))
            return found[-limit:] if limit else found
        newest = [baseline_record(r) for r in self.conn.execute(_LINE_NEWEST, [*args, limit]).fetchall()]
        return newest[::-1]

    def kernel_rows(self, baseline_ids: list[int]) -> list[tuple]:
        rows = self.conn.execute(_LOAD_KERNELS, (json.dumps(baseline_ids),)).fetchall()
        i = _FRAGMENTED
        return [r if r[i] is None else (*r[:i], bool(r[i]), *r[i + 1:]) for r in rows]

    def level_rows(self, baseline_ids: list[int]) -> list[tuple]:
        return self.conn.execute(_KERNEL_LEVELS, (json.dumps(baseline_ids),)).fetchall() if baseline_ids else []

    def list_acceptances(self, workload: str | None = None, active_on: date | None = None) -> list[AcceptanceRecord]:
        args = (bool(workload), workload or "", active_on is not None, active_on.isoformat() if active_on else "")
        return [acceptance_record(r) for r in self.conn.execute(_ACCEPTANCES, args).fetchall()]


# One kernel across baselines: the kernel rows come from ``ix_baseline_kernel_history`` alone (0008).
KERNEL_HISTORY_SQL = (
    'SELECT b.id, b."commit", b.created_at, b.workload, b.branch, bk.count, bk.total_ns, bk.avg_ns, bk.per_iter_ns, '
    "bk.share_window FROM baseline b JOIN baseline_kernel bk ON bk.baseline_id = b.id "
    "JOIN kernel_name kn ON kn.id = bk.name_id WHERE kn.name_hash = ? AND (? = 0 OR b.workload = ?) "
    "AND (? = 0 OR b.branch = ?) ORDER BY b.created_at, b.id")


def _samples(blobs: list[tuple[str, Any, Any]], keys: list[int]) -> dict[str, dict[int, float]]:
    """{name: {iteration: ns}} of the iterations with launches, as ``codec.unpack_samples`` reads them."""
    out: dict[str, dict[int, float]] = {}
    for name, ns_blob, cnt_blob in blobs:
        ns, cnt = _floats(ns_blob), _floats(cnt_blob)
        m = min(len(ns), len(keys))
        if len(cnt) < m:
            raise IndexError(f"stored launch counts cover {len(cnt)} iterations, times cover {m}")
        per = out.setdefault(name, {})
        for j in range(m):
            if cnt[j] > 0:  # NaN is not: as ``unpack_samples``
                per[keys[j]] = per.get(keys[j], 0.0) + ns[j]
        if not per:
            del out[name]
    return out


def open_reader(url: str, busy_timeout_s: float | None = None) -> SqliteReader | None:
    """A read-only reader of the store at ``url`` when this path may read it (see the module's doc), else None."""
    path = sqlite_path(url)
    if path is None or not url.startswith("sqlite:///") or "?" in url:
        return None
    try:
        if not path.is_file():
            return None
        # The tables first, as the guard reads them (immutable: a read-only connection to a WAL database
        # would create its -wal/-shm beside another application's file).
        tables = _sqlite_tables(path)
        if tables - OWN_TABLES - SQLITE_INTERNAL_TABLES or not OWN_TABLES <= tables:
            return None  # another application's database, or a store being created: the guarded path
        conn = connect_store(path, 30.0 if busy_timeout_s is None else busy_timeout_s)  # (read-only media too)
    except (OSError, ValueError, sqlite3.Error):
        return None
    try:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.Error:
        conn.close()
        return None
    if len(rows) != 1 or rows[0][0] != HEAD_REVISION:
        conn.close()
        return None  # older (to migrate) or newer (refused) schema: the Alembic path says which
    return SqliteReader(conn)


def read_only(url: str, busy_timeout_s: float | None, fn: Callable[[SqliteReader], T]) -> T | None:
    """``fn(reader)`` on the read-only path, or None when that path does not apply or a read fails (the
    caller then asks the SQLAlchemy path, which reports the problem as it always has).
    ``KBASE_NO_FAST_READ=1`` turns the path off (tests compare both paths' output)."""
    import os

    if os.environ.get("KBASE_NO_FAST_READ", "") not in ("", "0"):
        return None
    reader = open_reader(url, busy_timeout_s)
    if reader is None:
        return None
    try:
        return fn(reader)
    except (sqlite3.Error, Unreadable):
        return None
    finally:
        reader.close()
