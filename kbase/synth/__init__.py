"""Synthetic data from the project's own generator: Nsight Systems exports with known answers,
and the demo."""
