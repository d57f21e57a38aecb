"""Alembic migrations of the kbase store (shipped inside the wheel as kbase/migrations)."""
