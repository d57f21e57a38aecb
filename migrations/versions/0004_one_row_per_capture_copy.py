"""one row per capture: a unique (workload, commit, sha256, window, copy) key makes snapshots idempotent

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03 12:00:00

Stores written before this revision may hold the same capture several times (concurrent snapshots
raced past the duplicate check, or ``--force``): every row is kept, numbered 0, 1, ... per capture
in id order, so nothing a user stored is lost.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# No batch mode (table copies) on SQLite: recreating ``baseline`` with foreign keys on would cascade-
# delete every kernel row. SQLite adds and drops a plain column in place (3.35+).


def upgrade() -> None:
    op.add_column("baseline", sa.Column("capture_copy", sa.Integer(), server_default="0", nullable=False))
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT id, workload, \"commit\", source_sha256, window_spec FROM baseline "
                                "ORDER BY id")).fetchall()
    seen: dict[tuple, int] = {}
    for row in rows:
        key = tuple(row[1:])
        copy = seen.get(key, -1) + 1
        seen[key] = copy
        if copy:
            conn.execute(sa.text("UPDATE baseline SET capture_copy = :c WHERE id = :i"), {"c": copy, "i": row[0]})
    op.create_index("ux_baseline_capture", "baseline",
                    ["workload", "commit", "source_sha256", "window_spec", "capture_copy"], unique=True)


def downgrade() -> None:
    op.drop_index("ux_baseline_capture", table_name="baseline")
    op.execute("ALTER TABLE baseline DROP COLUMN capture_copy")
