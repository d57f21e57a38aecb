"""What kbase cannot skip when it reads an nsys export: its page decoder on the two tables it needs, alone.

    python benchmarks/decode_floor.py EXPORT [--sha256]

Decodes the kernel table's columns (start, end, GPU, launch, name) and the runtime table's (launch, thread,
start) with kbase's own reader (``readers.sqlite_columns.bulk_int_columns`` with the same expressions and numpy
twins as ``readers.nsys``) under the ``kbase`` process's policies (``cli.tuning``), one table after the other on
this thread, and nothing else: no window, classification, budget, leaderboard or output. ``--sha256`` also hashes
the file as the store's identity key does (``readers.source.file_sha256``). ``benchmarks/run.py`` times it beside
the sqlite3 floor, so the CPU ratios of ``kbase top`` and ``kbase snapshot`` can be read against the part of them
no analysis change removes: the iteration windows need the runtime table (the launch call of every kernel),
which the floor never reads.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    os.environ["KBASE_READ_THREADS"] = "1"  # one thread: the CPU seconds of the decoding itself
    from kbase.cli import tuning

    tuning.apply()  # the kbase process's own policies (allocator, BLAS threads), set before numpy is imported
    from kbase.readers.nsys_sql import (
        KERNEL_TABLE,
        RUNTIME_TABLE,
        capture_end,
        check_export,
        columns_of,
        kernel_exprs,
        kernel_raw,
        runtime_exprs,
        runtime_raw,
    )
    from kbase.readers.sqlite_columns import bulk_int_columns
    from kbase.readers.sqlite_source import connect_readonly

    path = Path(argv[0])
    conn = connect_readonly(path)
    try:
        tables = check_export(conn, path)
        kcols, stop_ns = columns_of(conn, KERNEL_TABLE), capture_end(conn, tables)
        rcols = columns_of(conn, RUNTIME_TABLE)
    finally:
        conn.close()
    kernels = bulk_int_columns(path, KERNEL_TABLE, kernel_exprs(kcols, stop_ns), raw=kernel_raw(kcols, stop_ns))
    runtime = bulk_int_columns(path, RUNTIME_TABLE, runtime_exprs(rcols) or [], raw=runtime_raw(rcols))
    print(f"kernel rows {len(kernels[0]):,} x {len(kernels)} columns; runtime rows {len(runtime[0]):,} x "
          f"{len(runtime)} columns")
    if "--sha256" in argv[1:]:
        from kbase.readers.source import file_sha256

        print(f"sha256 {file_sha256(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
