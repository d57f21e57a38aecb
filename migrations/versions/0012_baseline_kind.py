"""baseline kind: why a baseline was stored, a snapshot of the job or a midpoint of ``kbase bisect``

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06 05:40:00

``kbase bisect`` captures commits CI never profiled and stores each as a baseline of kind ``bisect``, so that
``prune`` and the listings can tell these probes from the branch's own record. Every baseline stored before
this revision was a snapshot: the column's server default says so, nothing to convert. Downgrade drops it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
import sqlmodel
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ADD/DROP COLUMN, no batch mode: recreating ``baseline`` on SQLite would cascade-delete every
# kernel row (see 0004).


def upgrade() -> None:
    op.add_column("baseline", sa.Column("kind", sqlmodel.sql.sqltypes.AutoString(length=16), nullable=False,
                                        server_default="snapshot"))


def downgrade() -> None:
    op.execute("ALTER TABLE baseline DROP COLUMN kind")
