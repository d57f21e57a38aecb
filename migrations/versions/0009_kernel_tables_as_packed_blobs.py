"""kernel tables as packed blobs: one baseline_kernels row per baseline instead of a row per kernel

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05 09:00:00

A 500-kernel x 50-iteration baseline took ~700 KiB as 500 ``baseline_kernel`` rows (launch sketches 576 B
and samples 400 B a row as float32, the history index, free page space). Now its whole kernel table is one
``baseline_kernels`` row of four packed-column blobs (``kbase.store.codec.kernel_blobs``, docs/store-format.md):
~40-60 KiB. Every leaderboard value is kept exactly; per-iteration ns and sketch quantiles become mantissa
codes (relative error <= 2^-11 and 2^-9; launch counts exact). ``workload_kernel`` records which kernel
names each workload holds (kernel lookup no longer joins a row per kernel).

Converting reads every kernel row once (5,000 baselines of 500 kernels: 200 s of CPU, 177 MiB, 3.6 GB ->
261 MB after VACUUM on the 2-core VM). SQLite does not shrink a file when a table is dropped:
``kbase.store.engine.upgrade`` runs VACUUM after this revision (outside the migration's transaction, where
SQLite allows it); PostgreSQL frees a dropped table's files at once. Downgrade writes the rows back from the blobs: leaderboard columns exactly, samples and sketches as
the blobs hold them.
"""

import json
from collections.abc import Iterator, Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ROW = ["baseline_id", "name_id", "rank", "gpus", "count", "total_ns", "avg_ns", "median_ns", "min_ns", "max_ns",
        "std_ns", "per_iter_ns", "count_per_iter", "share_window", "share_kernel", "amdahl_ceiling", "fragmented",
        "iter_ns", "iter_count", "launch_sketch"]
_INTS = ("name_id", "gpus", "count", "total_ns", "min_ns", "max_ns")
_FLOATS = ("avg_ns", "median_ns", "std_ns", "per_iter_ns", "count_per_iter", "share_window", "share_kernel",
           "amdahl_ceiling")
_FETCH = 20_000  # kernel rows per round trip


def _old_table() -> sa.Table:
    return sa.table("baseline_kernel", *(sa.column(c) for c in ["id", *_ROW]))


def _new_tables() -> None:
    op.create_table(
        "baseline_kernels",
        sa.Column("baseline_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("format", sa.Integer(), nullable=False),
        sa.Column("kernels", sa.Integer(), nullable=False),
        sa.Column("levels", sa.LargeBinary(), nullable=False),
        sa.Column("board", sa.LargeBinary(), nullable=False),
        sa.Column("samples", sa.LargeBinary(), nullable=True),
        sa.Column("sketches", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(["baseline_id"], ["baseline.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("baseline_id"),
    )
    op.create_table(
        "workload_kernel",
        sa.Column("workload", sa.String(length=200), nullable=False),
        sa.Column("name_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.ForeignKeyConstraint(["name_id"], ["kernel_name.id"]),
        sa.PrimaryKeyConstraint("workload", "name_id"),
        sqlite_with_rowid=False,
    )


def _grouped(conn) -> Iterator[tuple[int, list[tuple]]]:
    """Every baseline's kernel rows (``_ROW``), by baseline id then rank, one baseline at a time."""
    k = _old_table()
    res = _streamed(conn, sa.select(*(k.c[c] for c in _ROW)).order_by(k.c.baseline_id, k.c.rank))
    current: int | None = None
    rows: list[tuple] = []
    while batch := res.fetchmany(_FETCH):
        for r in batch:
            if r[0] != current:
                if rows:
                    yield current, rows  # type: ignore[misc]
                current, rows = r[0], []
            rows.append(tuple(r))
    if rows:
        yield current, rows  # type: ignore[misc]


def _table(rows: list[tuple], n_keys: int):
    """0008's kernel rows of one baseline (rank order) as a ``kernel_blobs.KernelTable``: samples padded or cut
    to the baseline's iteration keys as the 0008 reader did (``codec.sample_matrices``), NULL as NaN / zeros."""
    import numpy as np

    from kbase.analysis.sketch import CHUNKS, WIDTH
    from kbase.store.codec.kernel_blobs import KernelTable

    col = {c: i for i, c in enumerate(_ROW)}
    values: dict = {c: np.array([r[col[c]] for r in rows], dtype=np.int64) for c in _INTS}
    values |= {c: np.array([np.nan if r[col[c]] is None else float(r[col[c]]) for r in rows]) for c in _FLOATS}
    values["fragmented"] = np.array([bool(r[col["fragmented"]]) for r in rows])
    ns, cnt = np.zeros((len(rows), n_keys)), np.zeros((len(rows), n_keys))
    sketches = np.full((len(rows), CHUNKS, WIDTH), np.nan)
    size, any_sketch = CHUNKS * WIDTH * 4, False
    for i, r in enumerate(rows):
        a, b, s = (r[col[c]] for c in ("iter_ns", "iter_count", "launch_sketch"))
        if a:
            m = min(len(a) // 4, len(b or b"") // 4, n_keys)
            ns[i, :m] = np.frombuffer(bytes(a), dtype="<f4")[:m]
            cnt[i, :m] = np.frombuffer(bytes(b), dtype="<f4")[:m]
        if s and len(s) == size:  # another length never read as a sketch (``analysis.sketch.unpack``)
            sketches[i] = np.frombuffer(bytes(s), dtype="<f4").reshape(CHUNKS, WIDTH)
            any_sketch = True
    has_samples = n_keys > 0 and any(r[col["iter_ns"]] for r in rows)
    return KernelTable(**values, iter_ns=ns if has_samples else None, iter_count=cnt if has_samples else None,
                       sketches=sketches if any_sketch else None)


def _streamed(conn, statement):
    """``statement``'s result read in batches (PostgreSQL buffers a whole result unless told otherwise)."""
    return conn.execute(statement, execution_options={"stream_results": conn.dialect.name == "postgresql"})


def upgrade() -> None:
    from kbase.store.codec.format1 import FORMAT, encode

    _new_tables()
    conn = op.get_bind()
    keys = {bid: len(json.loads(k or "[]")) for bid, k in conn.execute(sa.text("SELECT id, iteration_keys FROM baseline"))}
    target = sa.table("baseline_kernels", *(sa.column(c) for c in
                                            ("baseline_id", "format", "kernels", "levels", "board", "samples", "sketches")))
    batch: list[dict] = []
    for baseline_id, rows in _grouped(conn):
        blobs = encode(_table(rows, keys.get(baseline_id, 0)))
        batch.append({"baseline_id": baseline_id, "format": FORMAT, "kernels": len(rows), "levels": blobs.levels,
                      "board": blobs.board, "samples": blobs.samples, "sketches": blobs.sketches})
        if len(batch) >= 200:
            conn.execute(target.insert(), batch)
            batch = []
    if batch:
        conn.execute(target.insert(), batch)
    conn.execute(sa.text("INSERT INTO workload_kernel (workload, name_id) SELECT DISTINCT b.workload, k.name_id "
                         "FROM baseline_kernel k JOIN baseline b ON b.id = k.baseline_id"))
    with op.batch_alter_table("baseline_kernel", schema=None) as batch_op:
        batch_op.drop_index("ix_baseline_kernel_history")
        batch_op.drop_index("ix_baseline_kernel_baseline_id")
    op.drop_table("baseline_kernel")


def downgrade() -> None:
    import numpy as np

    from kbase.store.codec.format1 import FORMAT, decode
    from kbase.store.codec.kernel_blobs import Blobs

    op.create_table(
        "baseline_kernel",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("baseline_id", sa.Integer(), nullable=False),
        sa.Column("name_id", sa.Integer(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("total_ns", sa.BigInteger(), nullable=False),
        *(sa.Column(c, sa.Float(), nullable=False) for c in ("avg_ns", "median_ns")),
        sa.Column("min_ns", sa.BigInteger(), nullable=False),
        sa.Column("max_ns", sa.BigInteger(), nullable=False),
        sa.Column("std_ns", sa.Float(), nullable=False),
        *(sa.Column(c, sa.Float(), nullable=True) for c in
          ("per_iter_ns", "count_per_iter", "share_window", "share_kernel", "amdahl_ceiling")),
        sa.Column("fragmented", sa.Boolean(), nullable=False),
        sa.Column("iter_ns", sa.LargeBinary(), nullable=True),
        sa.Column("iter_count", sa.LargeBinary(), nullable=True),
        sa.Column("launch_sketch", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(["baseline_id"], ["baseline.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["name_id"], ["kernel_name.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    conn = op.get_bind()
    old = _old_table()
    src = _streamed(conn, sa.text("SELECT baseline_id, format, levels, board, samples, sketches FROM baseline_kernels "
                                  "ORDER BY baseline_id"))
    while batch := src.fetchmany(100):
        rows = []
        for baseline_id, fmt, levels, board, samples, sketches in batch:
            if fmt != FORMAT:
                raise RuntimeError(f"baseline {baseline_id}: kernel blobs of format {fmt}, which this kbase cannot "
                                   "write back as rows; downgrade with the kbase that stored it")
            t = decode(Blobs(bytes(levels), bytes(board), samples and bytes(samples), sketches and bytes(sketches)))
            cols = {c: getattr(t, c).tolist() for c in (*_INTS, *_FLOATS, "fragmented")}
            for i in range(len(t)):
                row = {c: cols[c][i] for c in _INTS} | {"baseline_id": baseline_id, "rank": i + 1,
                                                        "fragmented": bool(cols["fragmented"][i])}
                row |= {c: None if cols[c][i] != cols[c][i] else cols[c][i] for c in _FLOATS}
                has = t.iter_ns is not None and t.iter_count is not None
                row["iter_ns"] = t.iter_ns[i].astype("<f4").tobytes() if has else None  # type: ignore[index]
                row["iter_count"] = t.iter_count[i].astype("<f4").tobytes() if has else None  # type: ignore[index]
                sk = None if t.sketches is None else t.sketches[i]
                row["launch_sketch"] = None if sk is None or np.isnan(sk).all() else sk.astype("<f4").tobytes()
                rows.append(row)
        if rows:
            conn.execute(old.insert(), rows)
    with op.batch_alter_table("baseline_kernel", schema=None) as batch_op:
        batch_op.create_index("ix_baseline_kernel_baseline_id", ["baseline_id"], unique=False)
        batch_op.create_index("ix_baseline_kernel_history", ["name_id", "baseline_id", "count", "total_ns", "avg_ns",
                                                             "per_iter_ns", "share_window"], unique=False)
    op.drop_table("workload_kernel")
    op.drop_table("baseline_kernels")
