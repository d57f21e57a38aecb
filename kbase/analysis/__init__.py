"""Stage 2-3 — pick the window (iterations), build the leaderboard, classify kernels by name."""
