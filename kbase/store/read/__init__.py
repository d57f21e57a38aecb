"""Reading the store: the one connection (``connect``: sqlite3 or psycopg2), every read as one statement
(``statements``, compiled to ``read_sql``), one reader (``reader.StoreReader``) returning records, the blobs shaped
for each read (``blob_reads``), "find this capture" (``identity``) and the top cache (``top_cache``)."""
