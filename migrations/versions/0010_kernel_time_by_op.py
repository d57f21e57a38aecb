"""kernel time by op: op names once each, and per baseline each kernel's launches and time by the op that launched it

Revision ID: 0010
Revises: 0008
Create Date: 2026-12-04 22:00:00

Two new tables, nothing else changes: baselines stored before this revision have no op rows and compare as
before (the library-swap rule). A kernel may serve several ops (elementwise kernels do), so its time is
split into (kernel, op) rows rather than an op id on the kernel row.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0010"
down_revision: str | None = "0008"
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
    op.create_table(
        "baseline_kernel_op",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("baseline_id", sa.Integer(), nullable=False),
        sa.Column("name_id", sa.Integer(), nullable=False),
        sa.Column("op_id", sa.Integer(), nullable=True),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.Column("total_ns", sa.BigInteger(), nullable=False),
        sa.Column("iter_ns", sa.LargeBinary(), nullable=True),
        sa.ForeignKeyConstraint(["baseline_id"], ["baseline.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["name_id"], ["kernel_name.id"]),
        sa.ForeignKeyConstraint(["op_id"], ["op_name.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_baseline_kernel_op_baseline_id", "baseline_kernel_op", ["baseline_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_baseline_kernel_op_baseline_id", table_name="baseline_kernel_op")
    op.drop_table("baseline_kernel_op")
    op.drop_table("op_name")
