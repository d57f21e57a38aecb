"""kernel time by op: op names once each, and each baseline's kernel time split by op as one more blob

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05 01:00:00

``op_name`` holds each distinct op key once (``aten::mm``, ``Linear/aten::mm``) with its op without scope;
``baseline_kernels.ops`` holds a baseline's (kernel, op) pairs as one packed-columns blob
(``kbase.store.codec.op_blobs``): a kernel may serve several ops (elementwise kernels do), and a kernel that serves
one op costs its row and its op id alone. Baselines stored before this revision have no op information
(``ops`` NULL) and compare as before (the library-swap rule): nothing to convert. Downgrade drops both.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "op_name",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name_hash", sqlmodel.sql.sqltypes.AutoString(length=40), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("op", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name_hash"),
    )
    op.add_column("baseline_kernels", sa.Column("ops", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("baseline_kernels") as batch:
        batch.drop_column("ops")
    op.drop_table("op_name")
