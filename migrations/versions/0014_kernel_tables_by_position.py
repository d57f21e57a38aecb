"""kernel tables by position: the blobs hold no store ids (kernel-table format 2)

Revision ID: 0014
Revises: 0013
Create Date: 2027-01-04 09:00:00

Format 1 held each row's ``kernel_name`` id inside the ``levels`` blob and each op's ``op_name`` id inside the
``ops`` blob, and stored the derivable columns as XOR residuals. Format 2 (``kernel_blobs``) refers to kernels by
row and to ops by their position in the baseline's sorted op list; the ids of those positions live beside the
blobs in two new columns, ``kernel_ids`` (ahead of ``levels``: history reads both) and ``op_ids``, so the blobs are
the same bytes in every store and export file. Every stored table is converted (``format1.convert``): every
leaderboard column, sample, sketch and op pair reads back as before; the samples and sketches blobs keep their
bytes. On SQLite the table is rebuilt for the column order (``VACUUM`` afterwards gives the pages back).

Downgrade writes format 1 back (``format1.encode``, the name ids and op ids restored into the blobs).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ORDER = ("baseline_id", "format", "kernels", "kernel_ids", "levels", "board", "samples", "sketches", "ops", "op_ids")
BATCH = 100


def _bytes(v):
    return None if v is None else bytes(v)


def _ids(conn, fmt: int) -> list[int]:
    return [r[0] for r in conn.execute(sa.text("SELECT baseline_id FROM baseline_kernels WHERE format = :f "
                                               "ORDER BY baseline_id"), {"f": fmt})]


def upgrade() -> None:
    from kbase.store.codec.format1 import FORMAT as FORMAT_1
    from kbase.store.codec.format1 import convert
    from kbase.store.codec.id_lists import id_list
    from kbase.store.codec.kernel_blobs import FORMAT

    op.add_column("baseline_kernels", sa.Column("kernel_ids", sa.LargeBinary(), nullable=True))
    op.add_column("baseline_kernels", sa.Column("op_ids", sa.LargeBinary(), nullable=True))
    conn = op.get_bind()
    op_key = dict(conn.execute(sa.text("SELECT id, key FROM op_name")).all())
    ids = _ids(conn, FORMAT_1)
    update = sa.text("UPDATE baseline_kernels SET format = :format, kernel_ids = :kernel_ids, levels = :levels, "
                     "board = :board, samples = :samples, sketches = :sketches, ops = :ops, op_ids = :op_ids "
                     "WHERE baseline_id = :baseline_id")
    for i in range(0, len(ids), BATCH):
        rows = conn.execute(sa.text("SELECT baseline_id, levels, board, samples, sketches, ops FROM baseline_kernels "
                                    "WHERE baseline_id IN :ids").bindparams(sa.bindparam("ids", expanding=True)),
                            {"ids": ids[i : i + BATCH]}).all()
        out = []
        for bid, levels, board, samples, sketches, ops in rows:
            blobs, new_ops, name_ids, op_ids = convert(bytes(levels), bytes(board), _bytes(samples), _bytes(sketches),
                                                       _bytes(ops), op_key)
            out.append({"baseline_id": bid, "format": FORMAT, "kernel_ids": id_list(name_ids), "levels": blobs.levels,
                        "board": blobs.board, "samples": blobs.samples, "sketches": blobs.sketches, "ops": new_ops,
                        "op_ids": None if new_ops is None else id_list(op_ids)})
        if out:
            conn.execute(update, out)
    if conn.dialect.name == "sqlite":  # the column order of a new store: kernel_ids ahead of the large blobs
        with op.batch_alter_table("baseline_kernels", recreate="always",
                                  partial_reordering=[ORDER]) as batch_op:
            batch_op.alter_column("kernel_ids", existing_type=sa.LargeBinary(), nullable=False)
    else:
        op.alter_column("baseline_kernels", "kernel_ids", existing_type=sa.LargeBinary(), nullable=False)


def downgrade() -> None:
    import numpy as np

    from kbase.store.codec.format1 import FORMAT as FORMAT_1
    from kbase.store.codec.format1 import encode, recoded
    from kbase.store.codec.id_lists import ids_of
    from kbase.store.codec.kernel_blobs import Blobs, decode
    from kbase.store.codec.op_blobs import decode_ops, encode_ops
    from kbase.store.codec.packed import Packed

    conn = op.get_bind()
    ids = _ids(conn, 2)
    update = sa.text("UPDATE baseline_kernels SET format = :format, levels = :levels, board = :board, ops = :ops "
                     "WHERE baseline_id = :baseline_id")
    for i in range(0, len(ids), BATCH):
        rows = conn.execute(sa.text("SELECT baseline_id, kernel_ids, levels, board, samples, sketches, ops, op_ids "
                                    "FROM baseline_kernels WHERE baseline_id IN :ids")
                            .bindparams(sa.bindparam("ids", expanding=True)), {"ids": ids[i : i + BATCH]}).all()
        out = []
        for bid, kernel_ids, levels, board, samples, sketches, ops, op_ids in rows:
            t = decode(Blobs(bytes(levels), bytes(board), _bytes(samples), _bytes(sketches)), ids_of(bytes(kernel_ids)),
                       sketches=False)
            blobs = encode(t)
            old_ops = None
            if ops is not None:
                from types import SimpleNamespace

                stored = decode_ops(Packed(bytes(ops)), t)
                by_position = [0, *ids_of(bytes(op_ids))]
                op_id = np.array([by_position[p] for p in stored.op_id.tolist()], dtype=np.int64)
                pairs = SimpleNamespace(count=stored.count, total_ns=stored.total_ns, iter_ns=stored.iter_ns)
                old_ops = encode_ops(pairs, stored.row, op_id, t.count, t.total_ns, t.iter_ns)
            out.append({"baseline_id": bid, "format": FORMAT_1, "levels": recoded(blobs.levels),
                        "board": blobs.board, "ops": old_ops})
        if out:
            conn.execute(update, out)
    with op.batch_alter_table("baseline_kernels") as batch_op:
        batch_op.drop_column("op_ids")
        batch_op.drop_column("kernel_ids")
