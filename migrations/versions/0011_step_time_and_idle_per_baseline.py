"""step time and idle per baseline: the GPU time budget's figures that history and steps follow

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06 06:00:00

A baseline's whole GPU time budget (``kbase.analysis.budget``) is stored in its ``summary_json``; these two
columns repeat its step time per iteration and its idle time per unit per GPU so ``kbase steps`` and
``kbase history`` follow them over commits without decoding every summary. Baselines stored before this
revision have no budget (their profiles are not in the store): both stay NULL. Downgrade drops both (the budget
stays in ``summary_json``).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("baseline", sa.Column("step_ns", sa.Float(), nullable=True))
    op.add_column("baseline", sa.Column("idle_ns", sa.Float(), nullable=True))


def downgrade() -> None:
    # A plain ALTER TABLE ... DROP COLUMN (SQLite 3.35+), never a batch copy of ``baseline``: dropping the old
    # table would cascade to every baseline's kernel table (``baseline_kernels`` ON DELETE CASCADE).
    op.execute("ALTER TABLE baseline DROP COLUMN idle_ns")
    op.execute("ALTER TABLE baseline DROP COLUMN step_ns")
