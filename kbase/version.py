"""kbase's version, in a module of its own: the store stamps it on every baseline, and a module below the
front door (``kbase/__init__.py`` re-exports ``kbase.api``) must not import the front door to read it."""

__version__ = "0.3.0"
