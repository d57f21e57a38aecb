"""Migrations: Alembic head, upgrades that keep every row, downgrade/upgrade round trips."""


def test_head_revision_constant_matches_alembic_head():
    """kbase.db.HEAD_REVISION lets a command skip importing Alembic; it must be the real head."""
    from alembic.script import ScriptDirectory

    from kbase.db import HEAD_REVISION, alembic_config

    assert ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head() == HEAD_REVISION
