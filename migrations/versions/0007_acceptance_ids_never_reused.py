"""acceptance ids are never reused (SQLite AUTOINCREMENT)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04 04:10:00

``kbase accept --list`` shows ids and ``--revoke ID`` takes one. A plain SQLite INTEGER PRIMARY KEY
hands a revoked acceptance's id to the next one when it was the largest, so a script revoking an id it
listed earlier could revoke another acknowledgement. AUTOINCREMENT keeps ids monotonic. SQLite only: a
PostgreSQL sequence never reuses a value. The table is rebuilt (nothing refers to it), rows kept, and
the counter starts after the largest id stored.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table("acceptance", recreate="always", table_kwargs={"sqlite_autoincrement": True}):
        pass


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    with op.batch_alter_table("acceptance", recreate="always", table_kwargs={"sqlite_autoincrement": False}):
        pass
