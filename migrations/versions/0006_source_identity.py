"""source identity: the file's mtime and a probe hash (size, first and last 64 KiB) per baseline

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04 00:20:00

``kbase top FILE`` answers from the store when FILE was stored at the current commit: size, mtime and
the probe find the baseline without reading the whole file. Baselines stored before this revision have
NULL here and are simply never matched (``snapshot`` still deduplicates them by the full sha256).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ADD/DROP COLUMN, no batch mode: recreating ``baseline`` on SQLite would cascade-delete every
# kernel row (see 0004).


def upgrade() -> None:
    op.add_column("baseline", sa.Column("source_mtime_ns", sa.BigInteger(), nullable=True))
    op.add_column("baseline", sa.Column("source_probe", sa.String(length=64), nullable=True))
    op.create_index("ix_baseline_commit_probe", "baseline", ["commit", "source_probe"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_baseline_commit_probe", table_name="baseline")
    op.execute("ALTER TABLE baseline DROP COLUMN source_probe")
    op.execute("ALTER TABLE baseline DROP COLUMN source_mtime_ns")
