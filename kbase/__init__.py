"""kbase: keep every commit's GPU kernel leaderboard and tell each change which kernels got fatter."""

__version__ = "0.1.0"
