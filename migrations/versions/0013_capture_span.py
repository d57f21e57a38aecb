"""capture span: whether a baseline's capture spans its whole program

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07 09:00:00

Two captures without iteration markers that each span their whole program are one run of its work each, and are
compared per run even when their launch counts differ (``comparison.work``); history noise per run reads the
past baselines' spans. The fact is decided when the window is taken (``analysis.span``) and kept in the
summary as well: "program", "slice", or NULL — the capture does not say, and every baseline stored before this
revision (kbase did not look): nothing to convert. Downgrade drops it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ADD/DROP COLUMN, no batch mode: recreating ``baseline`` on SQLite would cascade-delete every
# kernel row (see 0004).


def upgrade() -> None:
    op.add_column("baseline", sa.Column("capture_span", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE baseline DROP COLUMN capture_span")
