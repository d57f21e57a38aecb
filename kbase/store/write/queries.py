"""Writing the store through SQLAlchemy transactions (the statements of ``writer`` on their driver connection;
deletes and acceptances as SQLAlchemy Core). Every read is ``reader.StoreReader``'s (the one read layer); a write
returns the record of the row it stored, as a read of it would (``records``).

Writes are single transactions (``write_transaction``): a baseline and all its rows, or nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import delete

from kbase.errors import InputError, KbaseError, StoreError
from kbase.store.codec.codec import baseline_values
from kbase.store.engine import write_transaction
from kbase.store.schema.models import ACCEPTANCE, BASELINE, BASELINE_KERNELS, Acceptance
from kbase.store.schema.records import AcceptanceRecord, BaselineRecord, acceptance_of

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

    from kbase.analysis.leaderboard import Leaderboard
    from kbase.gitrepo import CommitInfo
    from kbase.readers.source import SourceInfo
    from kbase.store.codec.kernel_blobs import StoredTable
    from kbase.store.engine import Store
    from kbase.store.write.writer import Writer

def _writer(conn: Connection) -> Writer:
    """The write statements (``writer``) on the driver connection under ``conn``, in its transaction."""
    from kbase.store.write.writer import Writer

    return Writer(conn.connection.driver_connection, conn.dialect.name)


def name_ids(conn: Connection, kernels: list[tuple[str, str, str, str, str]]) -> dict[str, int]:
    """``writer.name_ids`` in ``conn``'s transaction: ids of the kernel names, inserting those not yet known."""
    from kbase.store.write import writer

    return writer.name_ids(_writer(conn), kernels)


def op_ids(conn: Connection, ops: list[tuple[str, str]]) -> dict[str, int]:
    """``writer.op_ids`` in ``conn``'s transaction: ids of the op keys, inserting those not yet known."""
    from kbase.store.write import writer

    return writer.op_ids(_writer(conn), ops)


def write_kernels(conn: Connection, workload: str, tables: list[tuple[int, StoredTable]]) -> None:
    """``writer.write_kernels`` (the one writer of kernel tables) in ``conn``'s transaction."""
    from kbase.store.write import writer

    writer.write_kernels(_writer(conn), workload, tables)


CAPTURE_KEY = ("workload", "commit", "source_sha256", "window_spec", "capture_copy")


@dataclass(frozen=True)
class Saved:
    baseline: BaselineRecord
    created: bool  # False: this capture was already stored at this commit (the stored row is returned)


def save_leaderboard(engine: Engine, lb: Leaderboard, *, workload: str, commit: CommitInfo, source: SourceInfo,
                     window_spec: str, tags: list[str] | None = None, note: str = "", url: str = "",
                     force: bool = False, kind: str = "snapshot") -> Saved:
    """Store one leaderboard as a baseline, atomically and at most once per capture: the unique capture
    key (workload, commit, sha256, window, copy) decides, so concurrent identical snapshots store one row.
    ``force`` stores another copy (the next copy number) of a capture already stored. The statements are
    ``writer``'s (what ``kbase snapshot`` runs on the driver), here in a SQLAlchemy transaction."""
    from kbase.store.write.writer import save_baseline, written_record

    values = baseline_values(lb, workload=workload, commit=commit, source=source, window_spec=window_spec, tags=tags,
                             note=note, kind=kind)
    try:
        with write_transaction(engine, url) as conn:
            written = save_baseline(_writer(conn), lb, values, force=force)
    except KbaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - driver errors become one line; the transaction rolled back
        raise StoreError(f"store: could not save the baseline ({type(exc).__name__}: {exc})") from None
    return Saved(written_record(values, written), created=written.created)


def delete_baseline(store: Store, baseline_id: int) -> BaselineRecord:
    """Delete one baseline; returns what was removed (an ``InputError`` naming ``@ID`` when there is none)."""
    found = store.reader.baseline(baseline_id)
    with write_transaction(store.engine, store.url) as conn:
        conn.execute(delete(BASELINE_KERNELS).where(BASELINE_KERNELS.c.baseline_id == baseline_id))
        conn.execute(delete(BASELINE).where(BASELINE.c.id == baseline_id))
    return found


def delete_baselines(engine: Engine, baseline_ids: list[int], url: str = "") -> None:
    """Delete several baselines in one transaction (``kbase prune``): all of them, or none."""
    with write_transaction(engine, url) as conn:
        for i in range(0, len(baseline_ids), 500):
            chunk = baseline_ids[i : i + 500]
            conn.execute(delete(BASELINE_KERNELS).where(BASELINE_KERNELS.c.baseline_id.in_(chunk)))
            conn.execute(delete(BASELINE).where(BASELINE.c.id.in_(chunk)))


def add_acceptance(engine: Engine, row: Acceptance, url: str = "") -> AcceptanceRecord:
    """Store an acknowledged regression; returns its record, with its id."""
    with write_transaction(engine, url) as conn:
        row.id = conn.execute(ACCEPTANCE.insert().values(**row.model_dump(exclude={"id"}))
                              .returning(ACCEPTANCE.c.id)).scalar_one()
    return acceptance_of(row)


def delete_acceptance(store: Store, acceptance_id: int) -> AcceptanceRecord:
    """Revoke one acceptance; returns what was removed."""
    found = store.reader.get_acceptance(acceptance_id)
    if found is None:
        raise InputError("no such acceptance in the store", field="acceptance", value=acceptance_id)
    with write_transaction(store.engine, store.url) as conn:
        conn.execute(delete(ACCEPTANCE).where(ACCEPTANCE.c.id == acceptance_id))
    return found


