"""Render what ``kbase prune``, ``export`` and ``import`` did: the prune listing (every baseline, kept or
deleted and why) as a table or JSON (schema ``kbase.prune/1``), and the one-line summaries of export and
import."""

from __future__ import annotations

from typing import Any

from kbase.render.columns import Column

PRUNE_SCHEMA = "kbase.prune/1"


def prune_doc(result: Any) -> dict[str, Any]:
    """``api.housekeeping.PruneResult`` as JSON states it."""
    return {
        "schema": PRUNE_SCHEMA,
        "applied": result.applied,
        "keep_branches": result.keep_branches,
        "older_than_s": result.older_than.total_seconds() if result.older_than is not None else None,
        "baselines": [{"id": i.baseline.id, "workload": i.baseline.workload, "commit": i.baseline.commit,
                       "branch": i.baseline.branch, "kind": i.baseline.kind,
                       "created_at": i.baseline.created_at.isoformat(),
                       "action": "keep" if i.keep else "delete", "why": i.why} for i in result.items],
        "tombstones": list(result.tombstones),
    }


def prune_summary(result: Any) -> str:
    n_del, n_keep = len(result.deleted), len(result.kept)
    if result.applied:
        head = f"deleted {n_del} baseline(s), kept {n_keep}"
        if result.tombstones:
            head += f"; {len(result.tombstones)} tombstone(s) written"
        return head
    return (f"would delete {n_del} baseline(s), keep {n_keep} (dry run: nothing deleted; --yes deletes)"
            if n_del else f"nothing to delete; {n_keep} baseline(s) kept")


PRUNE_COLUMNS = [
    Column("id", "id", 0),
    Column("action", "action", 0, justify="left"),
    Column("workload", "workload", 2, min_width=8, want_width=16, max_width=32, shrink=True, justify="left"),
    Column("commit", "commit", 0, justify="left"),
    Column("branch", "branch", 1, min_width=8, max_width=24, shrink=True, justify="left"),
    Column("created", "stored (UTC)", 3, justify="left"),
    Column("why", "why", 0, min_width=12, want_width=40, max_width=80, shrink=True, justify="left"),
]


def print_prune(result: Any, console: Any, *, quiet: bool = False, wide: bool = False) -> None:
    """The listing: one row per baseline, oldest first, with what prune does and why; then the summary."""
    if not quiet and result.items:
        from kbase.render.layout import print_table

        rows = [{"id": f"@{i.baseline.id}", "action": "keep" if i.keep else ("deleted" if result.applied else "delete"),
                 "workload": i.baseline.workload, "commit": i.baseline.commit[:12], "branch": i.baseline.branch or "–",
                 "created": i.baseline.created_at.strftime("%Y-%m-%d %H:%M"), "why": i.why} for i in result.items]
        print_table(console, PRUNE_COLUMNS, rows, wide=wide)
    console.print(prune_summary(result), highlight=False, markup=False, soft_wrap=True)


def export_summary(result: Any) -> str:
    parts = [f"{result.written} file(s) written", f"{result.present} already there"]
    if result.tombstoned:
        parts.append(f"{result.tombstoned} deleted baseline(s) left out (tombstoned)")
    return f"exported {result.baselines} baseline(s) and {result.acceptances} acceptance(s) to {result.folder}: " \
        + ", ".join(parts)


def import_summary(result: Any) -> str:
    refused = (f", {len(result.refused_tombstones)} tombstone(s) not applied (prune's keep rules keep their "
               "baseline)" if result.refused_tombstones else "")
    return (f"imported from {result.folder}: {result.added} new baseline(s), {result.already} already stored, "
            f"{result.deleted} deleted by tombstones, {result.acceptances_added} new acceptance(s){refused}")


def refused_tombstone_lines(result: Any) -> list[str]:
    """One line per tombstone an import did not apply: the baseline it names and why prune keeps it."""
    from kbase.display import inert

    return [inert(f"kbase: warning: tombstone not applied, {why}: {what}") for what, why in result.refused_tombstones]
