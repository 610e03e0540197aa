"""Start-up every long-running relmon process shares (bot, worker, beat): logging, the embedded Redis where no
REDIS_URL is set, the database schema, and Celery's configuration."""

from __future__ import annotations

from sqlalchemy.exc import SQLAlchemyError

from common import celery_app, metrics
from common.embedded_redis import EmbeddedRedis, ensure_embedded_redis
from common.telemetry.logs import setup_logging
from common.telemetry.scrub import mask_url, problem_text
from store.db import MigrationError, migrate_in_child, migrate_url
from store.judge_catalog import announce_judges
from store.settings import Settings

# Objects that must live as long as the process (the embedded Redis handle stops the server when collected).
_held: dict[str, EmbeddedRedis | None] = {}


class StartupError(RuntimeError):
    """A service relmon needs is not there at start-up: a setup problem, said in one line, not a traceback."""


def start_process(settings: Settings, component: str, *, migrate_in_child_process: bool = False) -> None:
    """Run once at the start of a process, before it serves or consumes anything. `migrate_in_child_process`:
    the bot's, so that the processes serving Slack never load Alembic (less memory in each)."""
    setup_logging(settings, component)
    announce_judges(settings)  # a broken judge file is said here, and left out: never a reason not to start
    metrics.prepare_process(settings, component)  # before anything imports prometheus-client
    _held["embedded_redis"] = ensure_embedded_redis(settings)  # None with REDIS_URL set
    migrate_schema(settings.resolved_database_url, in_child=migrate_in_child_process)
    celery_app.configure(settings)


def migrate_schema(url: str, *, in_child: bool = False) -> None:
    """Concurrent start-ups serialise on a lock (store.db.migrate)."""
    try:
        if in_child:
            migrate_in_child(url)
        else:
            migrate_url(url)
    except DATABASE_PROBLEMS as error:
        raise StartupError(database_problem("cannot bring the database schema up to date", url, error)) from None


# What a database URL that is wrong or a server that is down raise: a bad URL (ValueError: a port that is not a
# number; ImportError: a scheme whose driver is not installed), SQLAlchemy's errors, a failed child migration.
DATABASE_PROBLEMS = (SQLAlchemyError, MigrationError, ValueError, ImportError)


def database_problem(what: str, url: str, error: BaseException) -> str:
    """One line for a person: what failed, where (password masked), why, and what to check."""
    return f"{what} at {mask_url(url)}: {problem_text(error)} {DATABASE_ADVICE}"


DATABASE_ADVICE = (
    "Check DATABASE_URL (unset: SQLite in RELMON_DATA_DIR) and that the server is up; `relmon doctor` checks it."
)
