"""relmon's store: settings, SQL models, queries and migrations. Imports nothing else of relmon's."""

from store.db import Database
from store.settings import Settings

__all__ = ["Database", "Settings"]
