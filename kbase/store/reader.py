"""The one read layer of the store: every question a command asks of it, one method each, over the
statements of ``statements`` (the one source of the read SQL).

Two executors answer them alike: ``EngineReader`` runs the statements through SQLAlchemy (any store),
``fast_read.FastReader`` runs their compiled text on a plain read-only connection (a store at the head
schema: Python's sqlite3 for SQLite, libpq for PostgreSQL; no SQLAlchemy or SQLModel, ~0.4 s of
imports). The parameters, the chunking of long lists and the shaping of rows are this class's, so both
paths return the same values: SQLModel rows or their plain records (same fields, same types), kernel
tables decoded from their blobs (``blob_reads``; no pandas).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, TypeVar

from kbase.store.schema_names import name_hash

if TYPE_CHECKING:
    import numpy as np
    from sqlalchemy.engine import Engine

    from kbase.analysis.board import LeaderboardRows
    from kbase.analysis.capture import Capture
    from kbase.analysis.ops import OpPairs
    from kbase.store.codec import Names
    from kbase.store.kernel_blobs import KernelTable
    from kbase.store.models import Acceptance, Baseline
    from kbase.store.records import BaselineRecord

    AnyBaseline = Baseline | BaselineRecord

NO_LIMIT = 2**62  # the ``limit`` parameter's "all rows": one statement for both (SQLite refuses LIMIT NULL)
B = TypeVar("B", bound="AnyBaseline")  # what a path reads a baseline row as: the SQLModel row or its plain record
A = TypeVar("A")  # ... and an acceptance row
LIST_CHUNK = 400  # values per expanding IN list: far under SQLite's 32766 variables, few round trips


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


class StoreReader(Generic[B, A]):
    """Every read of the store. Subclasses execute a named statement (``rows``) and build its baseline and
    acceptance objects; everything else is shared."""

    def rows(self, statement: str, params: Mapping[str, Any]) -> list[tuple]:
        """The rows of statement ``statement`` (``statements.STATEMENTS``) with ``params``, as tuples."""
        raise NotImplementedError

    def _baseline(self, row: tuple) -> B:
        raise NotImplementedError

    def _acceptance(self, row: tuple) -> A:
        raise NotImplementedError

    def _when(self, value: Any) -> datetime | None:
        """A stored datetime as the models return it (aware UTC)."""
        return value

    def rows_in(self, statement: str, params: Mapping[str, Any], key: str, values: Iterable[Any]) -> list[tuple]:
        """``rows`` with the list parameter ``key`` = ``values``, ``LIST_CHUNK`` values per statement."""
        values = list(values)
        out: list[tuple] = []
        for i in range(0, len(values), LIST_CHUNK):
            out += self.rows(statement, {**params, key: values[i : i + LIST_CHUNK]})
        return out

    # ------------------------------------------------------------------------------------------ baselines

    def get_baseline(self, baseline_id: int) -> B | None:
        found = self.rows("baseline", {"id": baseline_id})
        return self._baseline(found[0]) if found else None

    def baseline(self, baseline_id: int) -> B:
        """One baseline; an ``InputError`` naming ``@ID`` when there is none."""
        from kbase.errors import InputError

        found = self.get_baseline(baseline_id)
        if found is None:
            raise InputError("no such baseline in the store", field="ref", value=f"@{baseline_id}")
        return found

    def list_baselines(self, workload: str | None = None, branch: str | None = None, commit_prefix: str | None = None,
                       limit: int | None = None) -> list[B]:
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

    def find_duplicate(self, workload: str, commit: str, sha256: str, window_spec: str) -> B | None:
        """A baseline of the same bytes on the same window at ``commit``: a snapshot stored already."""
        found = self.rows("duplicate_baseline", {"workload": workload, "commit": commit, "sha256": sha256,
                                                 "window_spec": window_spec})
        return self._baseline(found[0]) if found else None

    def baselines_at(self, workload: str, commits: list[str]) -> dict[str, list[B]]:
        """Baselines of ``workload`` at each of ``commits`` (full hashes), oldest first per commit."""
        found = [self._baseline(r) for r in self.rows_in("baselines_at", {"workload": workload}, "commits", commits)]
        out: dict[str, list[B]] = {}
        for b in sorted(found, key=lambda b: b.id or 0):
            out.setdefault(b.commit, []).append(b)
        return out

    def line_baselines(self, workload: str, *, fingerprint: str | None = None, commits: list[str] | None = None,
                       before_id: int | None = None, limit: int = 20) -> list[B]:
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

    # ------------------------------------------------------------------------------------------ kernel tables

    def kernel_tables(self, baseline_ids: list[int], *, samples: bool = True,
                      sketches: bool = True) -> dict[int, KernelTable]:
        """baseline id -> its stored kernel table (``kernel_blobs.KernelTable``: numpy columns in rank order); a
        baseline stored without kernels has none (``kernel_table`` reads it as empty)."""
        from kbase.store.blob_reads import kernel_tables

        rows = self.rows_in("kernel_blobs", {}, "ids", baseline_ids)
        return kernel_tables(rows, samples=samples, sketches=sketches)

    def kernel_table(self, baseline_id: int) -> KernelTable:
        """One baseline's kernel table (empty for a baseline without kernels)."""
        from kbase.store.kernel_blobs import empty_table

        return self.kernel_tables([baseline_id]).get(baseline_id) or empty_table()

    def op_pairs(self, baseline_id: int, t: KernelTable, kernel_names: list[str]) -> OpPairs | None:
        """Baseline ``baseline_id``'s kernel time by op (``analysis.ops.OpPairs``, samples in the stored key order)
        against its kernel table ``t`` (``kernel_names``: by row); None when it stores none (a profile without
        op ranges, or stored before 0010)."""
        from kbase.store.codec import op_pairs_of
        from kbase.store.op_blobs import stored_ops

        found = self.rows_in("op_blobs", {}, "ids", [baseline_id])
        if not found:
            return None
        bid, fmt, blob = found[0]
        stored = stored_ops(bid, fmt, blob, t)
        return op_pairs_of(stored, kernel_names, self.op_names(stored.op_id.tolist()))

    def op_levels(self, baseline_ids: list[int]) -> list[tuple[int, str, str, float]]:
        """(baseline_id, op key, op without scope, total_ns) of each (kernel, op) pair with an op of those of the
        given baselines that store ops (history noise sums them per op)."""
        from kbase.store.op_blobs import op_level_rows

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

        from kbase.store.blob_reads import level_matrix

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
        from kbase.store.blob_reads import history_rows

        found = self.name_ids([name])
        params = {"any_workload": not workload, "workload": workload or "", "any_branch": not branch,
                  "branch": branch or ""}
        return history_rows(self.rows("kernel_history", params) if found else [], found[0] if found else None,
                            self._when)

    def leaderboard_rows(self, b: AnyBaseline) -> LeaderboardRows:
        """Baseline ``b``'s stored leaderboard as rows, each value as the DataFrame path's records hold it
        (NULL per-iteration figures NaN, a NULL Amdahl ceiling infinite)."""
        from kbase.analysis.board import LeaderboardRows, bounds_from_samples
        from kbase.analysis.summary import COLUMNS, LeaderboardSummary
        from kbase.store.blob_reads import board
        from kbase.store.records import Unreadable

        found = self.rows("board_blobs", {"id": b.id})
        rows: list[dict[str, Any]] = []
        lb = board(b.id, *found[0][:3]) if found else None
        if lb is not None and lb.rows:
            names = self.names(lb.column("name_id"))
            cols = {c: lb.column(c) for c in COLUMNS if c not in ("name", "short_name", "family", "category", "tc")}
            inf = float("inf")
            cols["amdahl_ceiling"] = [inf if v != v else v for v in cols["amdahl_ceiling"]]
            text = [names[i] for i in lb.column("name_id")]
            for i, (name, short, category, tc, family) in enumerate(text):
                values = {"name": name, "short_name": short, "family": family, "category": category, "tc": tc}
                rows.append({c: values[c] if c in values else cols[c][i] for c in COLUMNS})
        try:
            summary: dict[str, Any] = json.loads(b.summary_json)
            keys = [int(k) for k in json.loads(b.iteration_keys)]
        except (ValueError, TypeError):
            raise Unreadable("summary or iteration keys are not JSON") from None
        notes = summary.pop("notes", [])
        lb_summary = LeaderboardSummary.from_dict(summary)

        def bounds() -> dict[str, tuple[float, float]]:  # (after the read: the samples' bytes are at hand)
            if not found or found[0][3] is None:
                return {}
            return bounds_from_samples(stored_samples(b.id, found[0][0], found[0][3], [r["name"] for r in rows],
                                                      keys), lb_summary)

        return LeaderboardRows(columns=list(COLUMNS), rows=rows, summary=lb_summary, notes=notes, bounds=bounds)

    # ------------------------------------------------------------------------------------------ acceptances

    def list_acceptances(self, workload: str | None = None, active_on: date | None = None) -> list[A]:
        """Acceptances, oldest first; of one workload, and only those unexpired on ``active_on``, when given."""
        params = {"any_workload": not workload, "workload": workload or "", "any_day": active_on is None,
                  "day": active_on or date.min}
        return [self._acceptance(r) for r in self.rows("acceptances", params)]

    def get_acceptance(self, acceptance_id: int) -> A | None:
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
        from kbase.store.blob_reads import level_pairs

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

        from kbase.store.blob_reads import series_rows

        parts = [series_rows(self.rows("kernel_series", {"ids": baseline_ids[i : i + LIST_CHUNK]}), name_ids)
                 for i in range(0, len(baseline_ids), LIST_CHUNK)] or [series_rows([], name_ids)]
        columns = {k: np.concatenate([p[0][k] for p in parts]) for k in parts[0][0]}
        return columns, [s for p in parts for s in p[1]]

    def leaderboard_view(self, baseline_id: int) -> list[tuple]:
        """(name, short_name, category, tc, per_iter_ns, count_per_iter, avg_ns, share_window, share_kernel,
        amdahl_ceiling, fragmented, count, total_ns, min_ns, max_ns, median_ns) of one baseline's kernels, by rank
        (NULL as None; ``fragmented`` a bool), from its ``levels`` and ``board`` blobs."""
        from kbase.store.blob_reads import board

        found = self.rows("board_blobs", {"id": baseline_id})
        if not found:
            return []
        lb = board(baseline_id, *found[0][:3])
        names = self.names(lb.column("name_id"))
        cols = [[None if v != v else v for v in lb.column(c)] for c in
                ("per_iter_ns", "count_per_iter", "avg_ns", "share_window", "share_kernel", "amdahl_ceiling")]
        tail = [lb.column(c) for c in ("count", "total_ns", "min_ns", "max_ns")]
        median = [None if v != v else v for v in lb.column("median_ns")]
        return [(*names[n][:4], *(c[i] for c in cols), bool(lb.column("fragmented")[i]), *(c[i] for c in tail),
                 median[i]) for i, n in enumerate(lb.column("name_id"))]


def stored_samples(baseline_id: Any, fmt: int, blob: Any, names: list[str],
                   keys: list[int]) -> dict[str, dict[int, float]]:
    """{name: {iteration: ns}} of the iterations with launches, from a ``samples`` blob (rows named ``names``)."""
    from kbase.store.blob_reads import packed
    from kbase.store.kernel_blobs import sample_rows

    out: dict[str, dict[int, float]] = {}
    packed(baseline_id, fmt, blob)
    ns_m, cnt_m = sample_rows(bytes(blob))
    for name, ns, cnt in zip(names, ns_m, cnt_m):
        per = {keys[j]: ns[j] for j in range(min(len(keys), len(ns))) if cnt[j] > 0}
        if per:
            out.setdefault(name, {}).update(per)
    return out


class EngineReader(StoreReader["Baseline", "Acceptance"]):
    """The statements through SQLAlchemy: any store it opens (SQLite, PostgreSQL, any schema kbase migrated)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def rows(self, statement: str, params: Mapping[str, Any]) -> list[tuple]:
        from kbase.store.statements import statement as built

        with self.engine.connect() as conn:
            # plain tuples: pandas probes each Row object for ``_fields`` etc. (~2x slower)
            return [tuple(r) for r in conn.execute(built(statement), dict(params)).fetchall()]

    def _baseline(self, row: tuple) -> Baseline:
        from kbase.store.models import Baseline
        from kbase.store.records import BASELINE_FIELDS

        return Baseline(**dict(zip(BASELINE_FIELDS, row)))

    def _acceptance(self, row: tuple) -> Acceptance:
        from kbase.store.models import Acceptance
        from kbase.store.records import ACCEPTANCE_FIELDS

        return Acceptance(**dict(zip(ACCEPTANCE_FIELDS, row)))


def as_reader(source: Engine | StoreReader[Any, Any]) -> StoreReader[Any, Any]:
    """A reader of ``source``: a reader as it is, an Engine through SQLAlchemy."""
    if isinstance(source, StoreReader):
        return source
    return EngineReader(source)


def load_capture(reader: StoreReader[Any, Any], b: AnyBaseline) -> Capture:
    """Baseline ``b`` as the comparison pools it (``analysis.capture.Capture``), without pandas."""
    from kbase.store.codec import capture_from_table

    assert b.id is not None
    t = reader.kernel_table(b.id)
    names = reader.names(t.name_id.tolist())
    ops = reader.op_pairs(b.id, t, [names[i][0] for i in t.name_id.tolist()]) if len(t) else None
    return capture_from_table(b, t, names, ops)
