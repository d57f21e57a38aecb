"""Helpers the tests share (``tests/`` is on ``sys.path`` through ``conftest.py``: ``from helpers.cli import
run_kbase``).

- ``shared``: the repository, the real exports and traces in ``../shared/data`` and how their tests skip;
- ``cli``: ``run_kbase`` (in this process or a child), ``kb``;
- ``library``: ``snap`` (``kbase.snapshot`` from keywords), ``engine_of``;
- ``tiny_export``: a small nsys export with the real column names, and ``assert_same_profile``;
- ``pg``: a throwaway PostgreSQL server and databases;
- ``diff_exports``: generated export pairs with known differences, and their diff sides;
- ``imports``: ``loaded``, the heavy modules a command loads in a fresh interpreter;
- ``kineto_traces``: PyTorch-profiler traces made and edited for the reader's tests;
- ``pages_tables``: tables made for the page decoder's tests;
- ``report_fixtures``: a generated history and its report;
- ``workflow_runner``: the CI templates' steps run as a job would.
"""
