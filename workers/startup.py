"""Start-up every long-running relmon process shares (bot, worker, beat): logging, the embedded Redis where no
REDIS_URL is set, the database schema, and Celery's configuration."""

from __future__ import annotations

from store.db import Database
from store.settings import Settings
from workers import celery_app
from workers.embedded_redis import EmbeddedRedis, ensure_embedded_redis
from workers.telemetry import setup_logging

# Objects that must live as long as the process (the embedded Redis handle stops the server when collected).
_held: dict[str, EmbeddedRedis | None] = {}


def start_process(settings: Settings, component: str, *, pool_size: int = 10) -> None:
    """Run once at the start of a process, before it serves or consumes anything."""
    setup_logging(settings, component)
    _held["embedded_redis"] = ensure_embedded_redis(settings)  # None with REDIS_URL set
    database = Database(settings.resolved_database_url, pool_size=pool_size)
    database.migrate()  # concurrent start-ups serialise on a lock (store.db.migrate)
    database.dispose()
    celery_app.configure(settings)
