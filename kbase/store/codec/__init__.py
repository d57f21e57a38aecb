"""The kernel-table format (docs/store-format.md): each baseline's kernel table as packed-column blobs
(``packed``, ``kernel_blobs``, ``sample_blobs``, ``op_blobs``, ``mantissa``), the leaderboard <-> store mapping
(``codec``), and format 1 read for migrations and old export folders (``format1``)."""
