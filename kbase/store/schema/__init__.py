"""The store's schema: the SQLModel tables (``models``; Alembic's ``env.py`` reads their metadata), the schema as
names only (``schema_names``: the migrations folder, the head revision, the tables), the records every read
returns (``records``), and what the store refuses to touch (``guard``, ``readonly``: foreign databases, read-only
media). The bottom of the store: the other subpackages import it, it imports none of them."""
