"""``baseline_kernels.format``: which layout of the four kernel-table blobs a row holds (``kernel_blobs``'; 1:
``format1``). Its own module: checking a row's format (``checked``, ``kbase history``'s 10,000 rows) needs
neither the encoders nor the column declarations ``kernel_blobs`` loads (~12 ms of imports)."""

FORMAT = 2
