"""SQLite file states the reader and identity tests share."""

# A writer that dies mid-transaction in rollback mode, leaving a hot journal beside the database (argv[1]).
HOT_JOURNAL_WRITER = """
import os, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=DELETE")
conn.execute("PRAGMA cache_size=1")  # spill changed pages to the main file before commit
conn.execute("BEGIN")
conn.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
conn.execute("INSERT INTO StringIds (id, value) SELECT id + 1000000, value FROM StringIds")
os._exit(0)  # die mid-transaction: a hot journal is left behind
"""
