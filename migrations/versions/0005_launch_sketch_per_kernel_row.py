"""launch sketch per kernel row: launch-duration quantiles per launch-order chunk (nullable)

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04 00:45:00

Baselines stored before this revision keep NULL: they still compare, without the matched-quantile
launch test (per-iteration samples and history noise still apply).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# No batch mode (table copies) on SQLite: recreating ``baseline_kernel`` is needless and slow, and a
# copy of a table with foreign keys on can cascade. SQLite adds and drops a plain column in place (3.35+).


def upgrade() -> None:
    op.add_column("baseline_kernel", sa.Column("launch_sketch", sa.LargeBinary(), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE baseline_kernel DROP COLUMN launch_sketch")
