"""What defines a stored kernel table's layout and needs neither the encoders nor the column declarations
``kernel_blobs`` loads (~12 ms of imports): ``FORMAT``, the layout a ``baseline_kernels`` row holds (``kernel_blobs``';
1: ``format1``), checked for every row ``kbase history`` reads; and ``history_values``, a history row's derived
figures, computed alike by ``kernel_blobs.history_row`` and ``history_levels.LevelsReader``."""

FORMAT = 2  # ``baseline_kernels.format``: ``kernel_blobs``' layout of the four blobs (1: ``format1``)

NAN = float("nan")


def history_values(count: int, total: int, meta: dict) -> tuple[int, int, float, float, float]:
    """(count, total_ns, avg_ns, per_iter_ns, share_window) of one row as its levels blob derives them: the mean,
    and the total over the header's divisors (``d_iter``, ``d_window``; NaN where one is missing)."""
    d_iter, d_window = meta.get("d_iter"), meta.get("d_window")
    return (count, total, total / count if count else NAN, NAN if d_iter is None else total / d_iter,
            NAN if d_window is None else total / d_window)
