"""The store reads of a comparison (``kbase diff`` / ``gate``), as one small interface with two
implementations: ``queries.EngineReader`` (SQLAlchemy, any store) and ``sqlite_read.SqliteReader`` (the
standard library's sqlite3 on a SQLite store at the head schema: no SQLAlchemy or SQLModel, ~0.4 s of
imports). Both return the same values: SQLModel rows or their plain records (same fields, same types),
kernel and level rows as plain tuples (what the comparison reads: no pandas), and DataFrames built from
those tuples by the same functions (``frames``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from kbase.analysis.capture import Capture
    from kbase.store.models import Acceptance, Baseline
    from kbase.store.records import AcceptanceRecord, BaselineRecord

@runtime_checkable
class StoreReader(Protocol):
    def baseline(self, baseline_id: int) -> Baseline | BaselineRecord:
        """One baseline; ``InputError`` (as ``queries.get_baseline``) when there is none."""
        ...

    def baselines_at(self, workload: str, commits: list[str]) -> Mapping[str, Sequence[Baseline | BaselineRecord]]:
        ...

    def line_baselines(self, workload: str, *, fingerprint: str | None = None, commits: list[str] | None = None,
                       before_id: int | None = None, limit: int = 20) -> Sequence[Baseline | BaselineRecord]:
        ...

    def kernel_rows(self, baseline_ids: list[int]) -> list[tuple]:
        """Kernel rows joined with their names, plain tuples in ``frames.KERNEL_COLUMNS`` order."""
        ...

    def level_rows(self, baseline_ids: list[int]) -> list[tuple]:
        """(baseline_id, name, short_name, per_iter_ns) tuples (``frames.LEVEL_COLUMNS``)."""
        ...

    def list_acceptances(self, workload: str | None = None,
                         active_on: date | None = None) -> Sequence[Acceptance | AcceptanceRecord]:
        ...


def as_reader(source: Engine | StoreReader) -> StoreReader:
    """A reader of ``source``: a reader as it is, an Engine through the SQLAlchemy queries."""
    if isinstance(source, StoreReader):
        return source
    from kbase.store.queries import EngineReader

    return EngineReader(source)


def load_capture(reader: StoreReader, b: Baseline | BaselineRecord) -> Capture:
    """Baseline ``b`` as the comparison pools it (``analysis.capture.Capture``), without pandas."""
    from kbase.store.codec import capture_from_rows

    assert b.id is not None
    return capture_from_rows(b, reader.kernel_rows([b.id]))
