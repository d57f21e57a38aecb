"""``baseline_kernels.format``: which layout of the four kernel-table blobs a row holds (``kernel_blobs``'; 1:
``format1``). Checking a row's format (``checked``, ``kbase history``'s 10,000 rows) needs neither the encoders nor
the column declarations ``kernel_blobs`` loads (~12 ms of imports), so the number is here too.
``kernel_blobs.FORMAT`` stays where it is, the same number (tests/store/test_history_levels.py keeps them equal):
the benchmarks hash the encoder's sources to tell whether their cached stores are current."""

FORMAT = 2
