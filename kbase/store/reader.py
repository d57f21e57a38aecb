"""The one read layer of the store: every question a command asks of it, one method each, over the
statements of ``statements`` (the one source of the read SQL).

Two executors answer them alike: ``EngineReader`` runs the statements through SQLAlchemy (any store),
``fast_read.FastReader`` runs their compiled text on a plain read-only connection (a store at the head
schema: Python's sqlite3 for SQLite, libpq for PostgreSQL; no SQLAlchemy or SQLModel, ~0.4 s of
imports). The parameters, the chunking of long lists and the shaping of rows are this class's, so both
paths return the same values: SQLModel rows or their plain records (same fields, same types), kernel and
level rows as plain tuples (no pandas).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kbase.store.schema_names import name_hash

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from kbase.analysis.board import LeaderboardRows
    from kbase.analysis.capture import Capture
    from kbase.store.models import Acceptance, Baseline
    from kbase.store.records import BaselineRecord

    AnyBaseline = Baseline | BaselineRecord

NO_LIMIT = 2**62  # the ``limit`` parameter's "all rows": one statement for both (SQLite refuses LIMIT NULL)
B = TypeVar("B", bound="AnyBaseline")  # what a path reads a baseline row as: the SQLModel row or its plain record
A = TypeVar("A")  # ... and an acceptance row
LIST_CHUNK = 400  # values per expanding IN list: far under SQLite's 32766 variables, few round trips
_FRAGMENTED = 17  # the Boolean column of ``kernel_rows`` (``frames.KERNEL_COLUMNS``)


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
        params = {"workload": workload, "any_fingerprint": not fingerprint, "fingerprint": fingerprint or "",
                  "any_id": before_id is None, "before_id": before_id or 0}
        if commits is None:
            return [self._baseline(r) for r in self.rows("line_baselines_newest", {**params, "limit": limit})][::-1]
        pos = {c: i for i, c in enumerate(commits)}
        found = [self._baseline(r) for r in self.rows_in("line_baselines_at", params, "commits", commits)]
        found.sort(key=lambda b: (-pos[b.commit], b.created_at, b.id or 0))
        return found[-limit:] if limit else found

    # ------------------------------------------------------------------------------------------ kernels

    def kernel_rows(self, baseline_ids: list[int]) -> list[tuple]:
        """Kernel rows joined with their names, plain tuples in ``frames.KERNEL_COLUMNS`` order."""
        i = _FRAGMENTED
        return [r if r[i] is None else (*r[:i], bool(r[i]), *r[i + 1:])
                for r in self.rows_in("kernel_rows", {}, "ids", baseline_ids)]

    def op_rows(self, baseline_ids: list[int]) -> list[tuple]:
        """(baseline_id, kernel name, op key, op, count, total_ns, iter_ns) tuples: kernels' time by op."""
        return self.rows_in("op_rows", {}, "ids", baseline_ids)

    def op_levels(self, baseline_ids: list[int]) -> list[tuple]:
        """(baseline_id, op key, op, total_ns) tuples: each op's time in each baseline."""
        return self.rows_in("op_levels", {}, "ids", baseline_ids)

    def level_rows(self, baseline_ids: list[int]) -> list[tuple]:
        """(baseline_id, name, short_name, per_iter_ns) tuples (``frames.LEVEL_COLUMNS``)."""
        return self.rows_in("level_rows", {}, "ids", baseline_ids)

    def kernel_names(self, workload: str | None = None) -> tuple[list[str], list[str]]:
        """The full and short names of the kernels stored (in baselines of ``workload`` when given)."""
        rows = self.rows("kernel_names", {"any_workload": not workload, "workload": workload or ""})
        return [r[0] for r in rows], [r[1] for r in rows]

    def kernel_history_rows(self, name: str, workload: str | None = None,
                            branch: str | None = None) -> list[dict[str, Any]]:
        """One kernel across baselines, oldest first: id, commit, created_at, workload, branch, count,
        total_ns, avg_ns, per_iter_ns, share_window (plain records: ``kbase history`` needs no pandas)."""
        cols = ["id", "commit", "created_at", "workload", "branch", "count", "total_ns", "avg_ns", "per_iter_ns",
                "share_window"]
        params = {"name_hash": name_hash(name), "any_workload": not workload, "workload": workload or "",
                  "any_branch": not branch, "branch": branch or ""}
        out = []
        for r in self.rows("kernel_history", params):
            rec = dict(zip(cols, r))
            rec["created_at"] = self._when(rec["created_at"])
            out.append(rec)
        return out

    def leaderboard_rows(self, b: AnyBaseline) -> LeaderboardRows:
        """Baseline ``b``'s stored leaderboard as rows, each value as the DataFrame path's records hold it
        (NULL per-iteration figures NaN, a NULL Amdahl ceiling infinite)."""
        from kbase.analysis.board import LeaderboardRows, bounds_from_samples
        from kbase.analysis.summary import COLUMNS, LeaderboardSummary
        from kbase.store.records import Unreadable, stored_samples

        raw = self.rows("leaderboard_rows", {"id": b.id})
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
            return bounds_from_samples(stored_samples(blobs, keys), lb_summary)

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
                "iterations_used", "window_ns", "total_kernel_ns", "compute_ns", "communication_ns", "memory_ns"]
        out = []
        for r in self.rows("trend_baselines", {"workload": workload, "any_branch": not branch, "branch": branch or ""}):
            rec = dict(zip(cols, r))
            rec["commit_date"], rec["created_at"] = self._when(rec["commit_date"]), self._when(rec["created_at"])
            rec["aligned"] = bool(rec["aligned"])  # SQLite's 0/1
            out.append(rec)
        return out

    def kernel_levels(self, baseline_ids: list[int]) -> list[tuple]:
        """(name_id, per_iter_ns) of every kernel row of the given baselines."""
        return self.rows_in("kernel_levels", {}, "ids", baseline_ids)

    def name_ids(self, names: Iterable[str]) -> list[int]:
        """The ids of the stored kernel names among ``names`` (full names)."""
        return [r[0] for r in self.rows_in("name_ids", {}, "hashes", [name_hash(n) for n in names])]

    def names_by_id(self, name_ids: list[int]) -> list[tuple]:
        """(id, name, short_name, category, tc) of the given kernel names."""
        return self.rows_in("names_by_id", {}, "ids", name_ids)

    def kernel_series(self, name_ids: list[int], workload: str) -> list[tuple]:
        """(baseline_id, name_id, count, total_ns, gpu_count, iter_ns) of the given kernels in every baseline
        of ``workload``."""
        return self.rows_in("kernel_series", {"workload": workload}, "ids", name_ids)

    def leaderboard_view(self, baseline_id: int) -> list[tuple]:
        """(name, short_name, category, tc, per_iter_ns, count_per_iter, avg_ns, share_window, share_kernel,
        amdahl_ceiling, fragmented, count, total_ns, min_ns, max_ns, median_ns) of one baseline's kernels, by rank
        (``fragmented`` a bool on every path: SQLite hands back 0/1)."""
        return [(*r[:10], bool(r[10]), *r[11:]) for r in self.rows("leaderboard_view", {"id": baseline_id})]


def _float(v: Any) -> float:
    return float("nan") if v is None else float(v)


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
    from kbase.store.codec import capture_from_rows

    assert b.id is not None
    return capture_from_rows(b, reader.kernel_rows([b.id]), [r[1:] for r in reader.op_rows([b.id])])
