"""Render stored baselines (``kbase list``, the baseline of ``kbase show``): the JSON record of a baseline
(schema ``kbase.list/1``) and the screen table, each commit with its subject and date."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kbase.render.columns import Column

if TYPE_CHECKING:
    from kbase.gitrepo import CommitNote

BaselineRecord = Any  # a kbase.store.schema.records.BaselineRecord, as every read returns it (render: no store)

LIST_SCHEMA = "kbase.list/1"
SUBJECT_WIDTH = 72  # a subject longer than this is cut (with an ellipsis) in every output but JSON


def kernel_per_iter(b: BaselineRecord) -> float | None:
    """Kernel time per iteration per GPU (the unit of ``diff``), or None for a window without iterations."""
    if not b.iterations_used or not b.gpu_count:
        return None
    return b.total_kernel_ns / (b.iterations_used * b.gpu_count)


def baseline_dict(b: BaselineRecord, note: CommitNote | None = None) -> dict[str, Any]:
    """One baseline as JSON states it; ``note``: its commit's subject (and date, when git knows the commit)."""
    date = (note.date if note is not None and note.date else None) or b.commit_date
    return {
        "id": b.id, "created_at": b.created_at.isoformat() if b.created_at else None, "workload": b.workload,
        "commit": b.commit, "commit_date": date.isoformat() if date else None,
        "subject": note.subject if note is not None else "",
        "branch": b.branch, "detached": b.detached, "dirty": b.dirty, "source": b.source_name,
        "sha256": b.source_sha256, "format": b.source_format, "gpu_models": b.gpu_models, "gpus": b.gpu_count,
        "window": b.window_desc, "aligned": b.aligned, "iterations": b.iterations_used,
        "total_kernel_ns": b.total_kernel_ns, "kernel_ns_per_iter": kernel_per_iter(b),
        "window_gpu_ns": b.window_gpu_ns, "tags": json.loads(b.tags),
        "note": b.note, "kbase_version": b.kbase_version, "kind": b.kind,
    }


LIST_FIELDS = ["id", "created_at", "workload", "commit", "commit_date", "subject", "branch", "detached", "dirty",
               "source", "sha256", "format", "gpu_models", "gpus", "window", "aligned", "iterations",
               "total_kernel_ns", "kernel_ns_per_iter", "window_gpu_ns", "tags", "note", "kbase_version", "kind"]


def list_doc(rows: Sequence[BaselineRecord], notes: Mapping[str, CommitNote]) -> dict[str, Any]:
    return {"schema": LIST_SCHEMA, "baselines": [baseline_dict(b, notes.get(b.commit)) for b in rows]}


COLUMNS = [
    Column("id", "id", 0),
    Column("commit", "commit", 0, justify="left"),
    Column("date", "date", 3, justify="left"),
    Column("workload", "workload", 0, min_width=8, want_width=16, max_width=32, shrink=True, justify="left"),
    Column("subject", "subject", 1, min_width=12, want_width=28, max_width=SUBJECT_WIDTH, shrink=True,
           justify="left"),
    Column("branch", "branch", 2, min_width=8, max_width=24, shrink=True, justify="left"),
    Column("gpus", "GPUs", 5, min_width=8, max_width=30, shrink=True, justify="left"),
    Column("window", "window", 6, min_width=12, max_width=40, shrink=True, justify="left"),
    Column("kernel", "kernel/iter/GPU", 0),
    Column("created", "stored (UTC)", 4, justify="left"),
    Column("kind", "kind", 5, justify="left"),
    Column("tags", "tags", 7, min_width=6, shrink=True, justify="left"),
]


def list_cells(rows: Sequence[BaselineRecord], notes: Mapping[str, CommitNote]) -> list[dict[str, str]]:
    """The screen rows; kernel time per iteration in one unit for the column (``units.column_unit``)."""
    from kbase.units import column_unit

    kernel = column_unit([kernel_per_iter(b) for b in rows])
    out = []
    for b in rows:
        note = notes.get(b.commit)
        date = (note.date if note is not None and note.date else None) or b.commit_date
        out.append({"id": f"@{b.id}", "created": b.created_at.strftime("%Y-%m-%d %H:%M"), "workload": b.workload,
                    "commit": b.commit[:12] + ("+dirty" if b.dirty else ""), "date": date.strftime("%Y-%m-%d")
                    if date else "–", "subject": note.subject if note is not None else "",
                    "branch": b.branch or "(detached)", "gpus": f"{b.gpu_count}x {b.gpu_models}",
                    "window": ("" if b.aligned else "NOT aligned: ") + b.window_desc,
                    "kernel": kernel(kernel_per_iter(b)), "kind": b.kind, "tags": ",".join(json.loads(b.tags))})
    return out


def print_list(rows: Sequence[BaselineRecord], notes: Mapping[str, CommitNote], console: Any,
               wide: bool = False) -> None:
    from kbase.render.layout import print_table

    print_table(console, COLUMNS, list_cells(rows, notes), wide=wide, title=f"{len(rows)} baseline(s)")
