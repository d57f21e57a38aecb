"""Stage 7 — render: tables, JSON, CSV, Markdown, JUnit. Data in ns; readable units on screen only."""
