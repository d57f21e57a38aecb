"""Writing the store: the one writer (``writer``: every baseline's rows, for snapshot, import and the synthetic
history) on the statements of ``write_statements`` (compiled to ``write_sql``), a new store created from the head
DDL (``create``), and the writes that still run through SQLAlchemy (``queries``: deletes, acceptances)."""
