"""``python -m kbase.cli``: the same entry point as the ``kbase`` command."""

from kbase.cli import main

main()
