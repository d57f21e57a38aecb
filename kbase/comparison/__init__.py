"""Stage 5-6 — resolve what to compare, pool repeat captures, diff per iteration, decide the gate."""
