"""The one read layer of the store: every question a command asks of it, one method each, over the
statements of ``statements`` (the one source of the read SQL), on one executor.

``StoreReader`` runs each statement's compiled text for its dialect (``read_sql``) on one DB-API connection:
Python's ``sqlite3`` for SQLite, psycopg2 for PostgreSQL (``connect``; the connection of the engine's own pool
where there is no other: in-memory SQLite). No SQLAlchemy or SQLModel is imported (~0.4 s), and no pandas:
every read returns plain records (``records``: one type per table), a stored leaderboard as the renderers'
rows (``analysis.board.LeaderboardRows``), kernel tables decoded from their blobs (``blob_reads``). A driver
error is one line (``errors.store_error``), never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from kbase.store.read.connect import bind, driver_error
from kbase.store.schema.records import (
    AcceptanceRecord,
    BaselineRecord,
    acceptance_record,
    baseline_record,
    utc_datetime,
)
from kbase.store.schema.schema_names import name_hash

if TYPE_CHECKING:
    import numpy as np

    from kbase.analysis.board import LeaderboardRows
    from kbase.analysis.capture import Capture
    from kbase.analysis.op_pairs import OpPairs
    from kbase.store.codec.codec import Names
    from kbase.store.codec.kernel_blobs import KernelTable

NO_LIMIT = 2**62  # the ``limit`` parameter's "all rows": one statement for both (SQLite refuses LIMIT NULL)
LIST_CHUNK = 400  # values per expanding IN list: far under SQLite's 32766 variables, few round trips
_T = TypeVar("_T")


class LinePoint(NamedTuple):
    """A baseline of a line of commits as ``kbase steps`` reads it (``StoreReader.line_points``)."""

    id: int
    commit: str
    created_at: datetime | None
    fingerprint: str
    aligned: bool
    window_ns: int
    iterations_used: int
    step_ns: float | None = None  # the budget's step time per iteration (NULL before 0011)
    idle_ns: float | None = None
    gpu_models: str = ""  # what ``comparison.setups`` says of a setup change
    gpu_count: int = 0
    window_spec: str = ""


class StoreReader:
    """Every read of the store, on one DB-API connection (``conn``: sqlite3's or psycopg2's) of ``dialect``
    ("sqlite" or "postgresql"); ``url`` names the store in error messages."""

    def __init__(self, conn: Any, dialect: str, url: str = "") -> None:
        from kbase.store.read.read_sql import SQL

        if dialect not in SQL:
            from kbase.errors import StoreError
            from kbase.store_urls import mask_url

            raise StoreError(f"store {mask_url(url)}: kbase reads SQLite and PostgreSQL stores, not {dialect}")
        self.conn, self.dialect, self.url = conn, dialect, url
        self._text = SQL[dialect]
        # a connection of SQLAlchemy's pool is not autocommit: each read ends its transaction (none left open)
        self._end = dialect == "postgresql" and not getattr(conn, "autocommit", True)

    def rows(self, statement: str, params: Mapping[str, Any]) -> list[tuple]:
        """The rows of statement ``statement`` (``statements.STATEMENTS``) with ``params``, as tuples."""
        return self.read_cursor(statement, params, lambda cur: cur.fetchall())

    def read_cursor(self, statement: str, params: Mapping[str, Any], reader: Callable[[Any], _T]) -> _T:
        """What ``reader`` makes of the executed statement's cursor (``rows``: all its rows; a read of thousands of
        blobs takes them a batch at a time, ``blob_reads.batched``), its driver's errors the store's."""
        sql, args = bind(self._text[statement], params, self.dialect)
        try:
            cur = self.conn.cursor()  # (DB-API: sqlite3's and psycopg2's rows are tuples)
            try:
                cur.execute(sql, args)
                return reader(cur)
            finally:
                cur.close()
                if self._end and not self.conn.closed:  # (psycopg2 closes it when Ctrl-C stops a query)
                    self.conn.rollback()
        except Exception as exc:
            if not driver_error(exc):
                raise
            from kbase.store.schema.errors import store_error

            raise store_error(self.url, exc) from None

    def close(self) -> None:
        self.conn.close()

    def _baseline(self, row: tuple) -> BaselineRecord:
        return baseline_record(row)

    def _acceptance(self, row: tuple) -> AcceptanceRecord:
        return acceptance_record(row)

    # A stored datetime as every record holds it (aware UTC); the function itself, not a method calling it:
    # ``kbase history`` reads 20,000.
    _when = staticmethod(utc_datetime)

    def rows_in(self, statement: str, params: Mapping[str, Any], key: str, values: Iterable[Any]) -> list[tuple]:
        """``rows`` with the list parameter ``key`` = ``values``, ``LIST_CHUNK`` values per statement."""
        values = list(values)
        out: list[tuple] = []
        for i in range(0, len(values), LIST_CHUNK):
            out += self.rows(statement, {**params, key: values[i : i + LIST_CHUNK]})
        return out

    # ------------------------------------------------------------------------------------------ baselines

    def get_baseline(self, baseline_id: int) -> BaselineRecord | None:
        found = self.rows("baseline", {"id": baseline_id})
        return self._baseline(found[0]) if found else None

    def baseline(self, baseline_id: int) -> BaselineRecord:
        """One baseline; an ``InputError`` naming ``@ID`` when there is none."""
        from kbase.errors import InputError

        found = self.get_baseline(baseline_id)
        if found is None:
            raise InputError("no such baseline in the store", field="ref", value=f"@{baseline_id}")
        return found

    def list_baselines(self, workload: str | None = None, branch: str | None = None, commit_prefix: str | None = None,
                       limit: int | None = None) -> list[BaselineRecord]:
        """Baselines, newest first, optionally filtered (``commit_prefix``: of the commit hash)."""
        escaped = (commit_prefix or "").lower().replace("/", "//").replace("%", "/%").replace("_", "/_")
        params = {"any_workload": not workload, "workload": workload or "", "any_branch": not branch,
                  "branch": branch or "", "any_commit": not commit_prefix, "commit_like": escaped + "%",
                  "limit": limit or NO_LIMIT}
        return [self._baseline(r) for r in self.rows("baselines", params)]

    def find_by_identity(self, commit: str, probe: str, size: int, mtime_ns: int, window_spec: str,
                         kbase_version: str, workload: str | None = None) -> int | None:
        """The id of the newest baseline of this very file (size, mtime, probe hash) at ``commit`` on this
        window by this kbase version (of ``workload``, else any): the cheap identity check of ``kbase top``."""
        found = self.rows("baseline_by_identity", {
            "commit": commit, "probe": probe, "size": size, "mtime_ns": mtime_ns, "window_spec": window_spec,
            "kbase_version": kbase_version, "any_workload": not workload, "workload": workload or ""})
        return int(found[0][0]) if found else None

    def find_duplicate(self, workload: str, commit: str, sha256: str, window_spec: str) -> BaselineRecord | None:
        """A baseline of the same bytes on the same window at ``commit``: a snapshot stored already."""
        found = self.rows("duplicate_baseline", {"workload": workload, "commit": commit, "sha256": sha256,
                                                 "window_spec": window_spec})
        return self._baseline(found[0]) if found else None

    def baselines_at(self, workload: str, commits: list[str]) -> dict[str, list[BaselineRecord]]:
        """Baselines of ``workload`` at each of ``commits`` (full hashes), oldest first per commit."""
        found = [self._baseline(r) for r in self.rows_in("baselines_at", {"workload": workload}, "commits", commits)]
        out: dict[str, list[BaselineRecord]] = {}
        for b in sorted(found, key=lambda b: b.id or 0):
            out.setdefault(b.commit, []).append(b)
        return out

    def line_baselines(self, workload: str, *, fingerprint: str | None = None, commits: list[str] | None = None,
                       before_id: int | None = None, limit: int = 20) -> list[BaselineRecord]:
        """The newest ``limit`` baselines of ``workload`` (with ``fingerprint``, at ``commits`` — a branch's
        first-parent line — and no newer than baseline ``before_id`` when given), oldest first by line
        position (commits given nearest first), then by creation."""
        return self._line(("line_baselines_newest", "line_baselines_at"), self._baseline, workload, fingerprint,
                          commits, before_id, limit)

    def line_points(self, workload: str, *, commits: list[str] | None = None, limit: int = 20) -> list[LinePoint]:
        """``line_baselines`` of ``workload``, each as the few fields ``kbase steps`` reads (``LinePoint``): at
        50,000 baselines the whole rows cost ~1 s to read and build."""
        def point(r: tuple) -> LinePoint:
            return LinePoint(r[0], r[1], self._when(r[2]), r[3], bool(r[4]), r[5], r[6], r[7], r[8], r[9] or "",
                             int(r[10] or 0), r[11] or "")

        return self._line(("line_points_newest", "line_points_at"), point, workload, None, commits, None, limit)

    def _line(self, statements: tuple[str, str], make: Any, workload: str, fingerprint: str | None,
              commits: list[str] | None, before_id: int | None, limit: int) -> list:
        params = {"workload": workload, "any_fingerprint": not fingerprint, "fingerprint": fingerprint or "",
                  "any_id": before_id is None, "before_id": before_id or 0}
        if commits is None:
            return [make(r) for r in self.rows(statements[0], {**params, "limit": limit})][::-1]
        pos = {c: i for i, c in enumerate(commits)}
        found = [make(r) for r in self.rows_in(statements[1], params, "commits", commits)]
        found.sort(key=lambda b: (-pos[b.commit], b.created_at, b.id or 0))
        return found[-limit:] if limit else found

    # ------------------------------------------------------------------------------------------ export and import

    def baseline_ids(self, workload: str | None = None) -> list[int]:
        """Every baseline's id (of ``workload`` when given), in id order."""
        return [r[0] for r in self.rows("baseline_ids", {"any_workload": not workload, "workload": workload or ""})]

    def baselines_by_id(self, baseline_ids: list[int]) -> list[BaselineRecord]:
        """The given baselines (those that exist), in no particular order."""
        return [self._baseline(r) for r in self.rows_in("baselines_by_id", {}, "ids", baseline_ids)]

    def kernel_rows(self, baseline_ids: list[int]) -> dict[int, dict[str, Any]]:
        """baseline id -> its whole ``baseline_kernels`` row (``records.KERNEL_ROW_FIELDS``; blobs as bytes)."""
        from kbase.store.schema.records import KERNEL_ROW_FIELDS

        return {r[0]: dict(zip(KERNEL_ROW_FIELDS, r)) for r in self.rows_in("kernel_rows", {}, "ids", baseline_ids)}

    def capture_keys(self, commits: list[str]) -> list[tuple]:
        """(id, workload, commit, source sha256, window, copy) of every baseline at ``commits``."""
        return self.rows_in("capture_keys", {}, "commits", sorted(set(commits)))

    # ------------------------------------------------------------------------------------------ kernel tables

    def kernel_tables(self, baseline_ids: list[int], *, samples: bool = True,
                      sketches: bool = True) -> dict[int, KernelTable]:
        """baseline id -> its stored kernel table (``kernel_blobs.KernelTable``: numpy columns in rank order); a
        baseline stored without kernels has none (``kernel_table`` reads it as empty)."""
        from kbase.store.read.blob_reads import kernel_tables

        rows = self.rows_in("kernel_blobs", {}, "ids", baseline_ids)
        return kernel_tables(rows, samples=samples, sketches=sketches)

    def kernel_table(self, baseline_id: int) -> KernelTable:
        """One baseline's kernel table (empty for a baseline without kernels)."""
        from kbase.store.codec.kernel_blobs import empty_table

        return self.kernel_tables([baseline_id]).get(baseline_id) or empty_table()

    def op_pairs(self, baseline_id: int, t: KernelTable, kernel_names: list[str]) -> OpPairs | None:
        """Baseline ``baseline_id``'s kernel time by op (``analysis.ops.OpPairs``, samples in the stored key order)
        against its kernel table ``t`` (``kernel_names``: by row); None when it stores none (a profile without
        op ranges, or stored before 0010)."""
        from kbase.store.codec.codec import op_pairs_of
        from kbase.store.codec.op_blobs import stored_ops

        found = self.rows_in("op_blobs", {}, "ids", [baseline_id])
        if not found:
            return None
        bid, fmt, op_ids, blob = found[0]
        stored = stored_ops(bid, fmt, blob, op_ids, t)
        return op_pairs_of(stored, kernel_names, self.op_names(stored.op_id.tolist()))

    def op_levels(self, baseline_ids: list[int]) -> list[tuple[int, str, str, float]]:
        """(baseline_id, op key, op without scope, total_ns) of each (kernel, op) pair with an op of those of the
        given baselines that store ops (history noise sums them per op)."""
        from kbase.store.codec.op_blobs import op_level_rows

        rows = op_level_rows(self.rows_in("op_level_blobs", {}, "ids", baseline_ids))
        names = self.op_names(r[1] for r in rows)
        return [(b, *names[i], total) for b, i, total in rows]

    def op_names(self, op_ids: Iterable[int]) -> dict[int, tuple[str, str]]:
        """op id -> (op key, op without scope) of the given ``op_name`` ids (0, no op, left out)."""
        wanted = sorted({i for i in op_ids if i})
        return {r[0]: (r[1], r[2]) for r in self.rows_in("op_names_by_id", {}, "ids", wanted)} if wanted else {}

    def names(self, name_ids: Iterable[int]) -> Names:
        """name id -> (name, short name, category, tc, family) of the given kernel names."""
        return {r[0]: tuple(r[1:]) for r in self.names_by_id(sorted(set(name_ids)))}

    def level_matrix(self, baseline_ids: list[int]) -> tuple[list[str], list[str], np.ndarray]:
        """(full names in name order, their short names, names x baselines matrix of time per iteration per
        GPU) of the given baselines: NaN where a kernel did not run, 0 where its level is NULL (a baseline
        without iteration markers: callers leave those out). Reads each baseline's ``levels`` blob alone."""
        import numpy as np

        from kbase.store.read.blob_reads import level_matrix

        ids, matrix = level_matrix(self.rows_in("level_blobs", {}, "ids", baseline_ids), baseline_ids)
        names = self.names(ids.tolist())
        order = sorted(range(len(ids)), key=lambda i: names[int(ids[i])][0])
        return ([names[int(ids[i])][0] for i in order], [names[int(ids[i])][1] for i in order],
                matrix[np.asarray(order, dtype=np.int64)] if order else matrix)

    def kernel_names(self, workload: str | None = None) -> tuple[list[str], list[str]]:
        """The full and short names of the kernels stored (in baselines of ``workload`` when given)."""
        rows = self.rows("kernel_names", {"any_workload": not workload, "workload": workload or ""})
        return [r[0] for r in rows], [r[1] for r in rows]

    def kernel_history_rows(self, name: str, workload: str | None = None,
                            branch: str | None = None) -> list[dict[str, Any]]:
        """One kernel across baselines, oldest first: id, commit, created_at, workload, branch, count,
        total_ns, avg_ns, per_iter_ns, share_window (plain records: ``kbase history`` needs no pandas)."""
        from kbase.store.read.blob_reads import batched, history_rows

        found = self.name_ids([name])
        params = {"any_workload": not workload, "workload": workload or "", "any_branch": not branch,
                  "branch": branch or ""}
        if not found:
            return []
        return self.read_cursor("kernel_history", params, lambda cur: history_rows(batched(cur), found[0], self._when))

    def leaderboard(self, b: BaselineRecord) -> LeaderboardRows:
        """Baseline ``b``'s stored leaderboard, as every read of one returns it: the renderers' rows, each value
        as a computed leaderboard's records hold it (NULL per-iteration figures NaN, a NULL Amdahl ceiling
        infinite); no numpy."""
        from kbase.store.read.blob_reads import leaderboard_rows

        assert b.id is not None
        found = self.rows("board_blobs", {"id": b.id})
        return leaderboard_rows(b, found[0] if found else None, self.names)

    # ------------------------------------------------------------------------------------------ acceptances

    def list_acceptances(self, workload: str | None = None, active_on: date | None = None) -> list[AcceptanceRecord]:
        """Acceptances, oldest first; of one workload, and only those unexpired on ``active_on``, when given."""
        params = {"any_workload": not workload, "workload": workload or "", "any_day": active_on is None,
                  "day": active_on or date.min}
        return [self._acceptance(r) for r in self.rows("acceptances", params)]

    def get_acceptance(self, acceptance_id: int) -> AcceptanceRecord | None:
        found = self.rows("acceptance", {"id": acceptance_id})
        return self._acceptance(found[0]) if found else None

    # ------------------------------------------------------------------------------------------ the trend

    def workloads(self) -> list[str]:
        """Workload names in the store, sorted."""
        return [r[0] for r in self.rows("workloads", {})]

    def trend_baselines(self, workload: str, branch: str | None = None) -> list[dict[str, Any]]:
        """What the report's trend draws of each baseline of ``workload`` (on ``branch``), oldest first."""
        cols = ["id", "commit", "commit_date", "created_at", "branch", "fingerprint", "gpu_count", "aligned",
                "iterations_used", "window_ns", "total_kernel_ns", "compute_ns", "communication_ns", "memory_ns",
                "kind"]
        out = []
        for r in self.rows("trend_baselines", {"workload": workload, "any_branch": not branch, "branch": branch or ""}):
            rec = dict(zip(cols, r))
            rec["commit_date"], rec["created_at"] = self._when(rec["commit_date"]), self._when(rec["created_at"])
            rec["aligned"] = bool(rec["aligned"])  # SQLite's 0/1
            out.append(rec)
        return out

    def budget_summaries(self, baseline_ids: list[int]) -> list[tuple]:
        """(id, summary_json) of the given baselines (the report reads the GPU time budget stored in each)."""
        return self.rows_in("budget_summaries", {}, "ids", baseline_ids)

    def kernel_levels(self, baseline_ids: list[int]) -> list[tuple]:
        """(name_id, per_iter_ns) of every kernel of the given baselines."""
        from kbase.store.read.blob_reads import level_pairs

        return level_pairs(self.rows_in("level_blobs", {}, "ids", baseline_ids))

    def name_ids(self, names: Iterable[str]) -> list[int]:
        """The ids of the stored kernel names among ``names`` (full names)."""
        return [r[0] for r in self.rows_in("name_ids", {}, "hashes", [name_hash(n) for n in names])]

    def names_by_id(self, name_ids: list[int]) -> list[tuple]:
        """(id, name, short_name, category, tc, family) of the given kernel names."""
        return self.rows_in("names_by_id", {}, "ids", name_ids)

    def kernel_series(self, name_ids: list[int], baseline_ids: list[int]) -> tuple[dict[str, np.ndarray], list]:
        """The given kernels in the given baselines: columns ``baseline_id``, ``name_id``, ``count``,
        ``total_ns``, ``gpu_count`` (an entry per kernel and baseline), and each entry's ns per iteration
        key summed over GPUs (float64; None without samples). ``LIST_CHUNK`` baselines' blobs at a time."""
        import numpy as np

        from kbase.store.read.blob_reads import series_rows

        parts = [series_rows(self.rows("kernel_series", {"ids": baseline_ids[i : i + LIST_CHUNK]}), name_ids)
                 for i in range(0, len(baseline_ids), LIST_CHUNK)] or [series_rows([], name_ids)]
        columns = {k: np.concatenate([p[0][k] for p in parts]) for k in parts[0][0]}
        return columns, [s for p in parts for s in p[1]]

    def leaderboard_view(self, baseline_id: int) -> list[tuple]:
        """(name, short_name, category, tc, per_iter_ns, count_per_iter, avg_ns, share_window, share_kernel,
        amdahl_ceiling, fragmented, count, total_ns, min_ns, max_ns, median_ns) of one baseline's kernels, by rank
        (NULL as None; ``fragmented`` a bool), from its ``levels`` and ``board`` blobs."""
        from kbase.store.read.blob_reads import board

        found = self.rows("board_blobs", {"id": baseline_id})
        if not found:
            return []
        from kbase.store.codec.id_lists import ids_of

        lb = board(baseline_id, *found[0][:3])
        kernel_ids = ids_of(bytes(found[0][4]))
        names = self.names(kernel_ids)
        cols = [[None if v != v else v for v in lb.column(c)] for c in
                ("per_iter_ns", "count_per_iter", "avg_ns", "share_window", "share_kernel", "amdahl_ceiling")]
        tail = [lb.column(c) for c in ("count", "total_ns", "min_ns", "max_ns")]
        median = [None if v != v else v for v in lb.column("median_ns")]
        return [(*names[n][:4], *(c[i] for c in cols), bool(lb.column("fragmented")[i]), *(c[i] for c in tail),
                 median[i]) for i, n in enumerate(kernel_ids)]


def load_capture(reader: StoreReader, b: BaselineRecord) -> Capture:
    """Baseline ``b`` as the comparison pools it (``analysis.capture.Capture``), without pandas."""
    from kbase.store.codec.codec import capture_from_table

    assert b.id is not None
    t = reader.kernel_table(b.id)
    names = reader.names(t.name_id.tolist())
    ops = reader.op_pairs(b.id, t, [names[i][0] for i in t.name_id.tolist()]) if len(t) else None
    return capture_from_table(b, t, names, ops)
