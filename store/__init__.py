"""relmon's store: settings, channel rules, SQL models, queries and migrations. Imports nothing else of relmon's.

Kept import-free so that `store.settings` loads without SQLAlchemy or Alembic (the `relmon judge` path).
"""
