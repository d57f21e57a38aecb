"""Integer columns of a SQLite table decoded straight from the file's B-tree pages, in numpy.

SQLite steps through a table one row at a time: ~0.4 CPU-seconds per 1M kernel rows through ADBC, most of
what ``kbase top`` and ``kbase snapshot`` cost. The records of an nsys table are small and all-integer, and
the file format (https://www.sqlite.org/fileformat2.html) lays them out so that whole pages decode as
arrays: a leaf page's cell pointers, each cell's two varints, each record's serial types and its big-endian
values. No library reads SQLite pages into arrays (ADBC, the ``sqlite3`` module and apsw all step rows), so
this package does, for the one shape it needs:

- :mod:`.btree`: the table's root and column positions, pages by number, the leaves in key order;
- :mod:`.records`: a batch of leaf pages' records decoded at once;
- :mod:`.columns`: :func:`int_columns`, chunk by chunk, with a helper thread (:class:`Assist`).

It reads only what it is sure of, and answers ``None`` for everything else, so the caller reads the table
through SQLite as before, with SQLite's own errors: a ``WITHOUT ROWID`` or generated-column table, a column
that aliases the rowid, a page or cell pointer out of place, a record shorter than the columns asked for,
a needed value that is not an integer (text, a float: the reader's strict path takes over), a value
reaching past its page (an overflowing record), a varint longer than 8 bytes. The file must be the committed
database (:func:`kbase.readers.sqlite_source.committed_export`).

``KBASE_SQLITE_PAGES=0`` switches the decoder off (:func:`enabled`): the nsys reader then reads every table
through SQLite (ADBC, or ``sqlite3`` for a small table), with the same results — tests read every export
both ways and compare.
"""

from __future__ import annotations

import os

from kbase.readers.sqlite_pages.columns import Assist, int_columns

__all__ = ["Assist", "enabled", "int_columns"]

SWITCH = "KBASE_SQLITE_PAGES"


def enabled() -> bool:
    """Whether the nsys reader decodes tables from their pages: yes unless ``KBASE_SQLITE_PAGES`` is ``0``
    (or ``false``, ``no``, ``off``), read at each call."""
    return os.environ.get(SWITCH, "").strip().lower() not in ("0", "false", "no", "off")
