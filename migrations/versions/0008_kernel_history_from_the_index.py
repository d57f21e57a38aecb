"""one kernel's history read from an index: ix_baseline_kernel_history covers the history columns

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 07:00:00

``kbase history KERNEL`` reads one row per baseline holding the kernel. Through the old
``ix_baseline_kernel_name (name_id, baseline_id)`` each of those rows was a separate table read (rows
carry per-iteration samples and launch sketches, so ~1 KiB each and one page apiece): 10,000 baselines
were 10,000 random page reads (~50 ms). The new index starts with the same two columns (every query the
old one served, it serves) and adds the columns a history row shows, so the range scan alone answers.
Building it on an existing store reads every kernel row once (~12 s for 5M rows on 2 cores).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_HISTORY_COLUMNS = ["name_id", "baseline_id", "count", "total_ns", "avg_ns", "per_iter_ns", "share_window"]


def upgrade() -> None:
    with op.batch_alter_table("baseline_kernel", schema=None) as batch_op:
        batch_op.create_index("ix_baseline_kernel_history", _HISTORY_COLUMNS, unique=False)
        batch_op.drop_index("ix_baseline_kernel_name")


def downgrade() -> None:
    with op.batch_alter_table("baseline_kernel", schema=None) as batch_op:
        batch_op.create_index("ix_baseline_kernel_name", ["name_id", "baseline_id"], unique=False)
        batch_op.drop_index("ix_baseline_kernel_history")
