"""Engine, sessions and migrations. Alembic migrations run at start-up (`migrate`)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def make_engine(url: str, *, pool_size: int = 10) -> Engine:
    """An engine tuned for the URL's database: WAL and a busy timeout for SQLite, a pool for PostgreSQL."""
    if url.startswith("sqlite"):
        path = url.split("///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # hide_parameters: a failed statement's message would otherwise carry its bound values (questions and
        # answers) into logs and Sentry.
        engine = create_engine(url, connect_args={"timeout": 30, "check_same_thread": False}, hide_parameters=True)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record) -> None:  # pragma: no cover - trivial
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        return engine
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        # psycopg 3 is the driver we ship.
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    # No pool_pre_ping: it costs a round trip on every checkout, about one statement in four on the hot path.
    # After a server restart the first statement on a dead connection fails instead; SQLAlchemy then discards
    # every pooled connection of that age at once, the failed task retries (OperationalError), and the bot answers
    # 500 so that Slack resends the event.
    return create_engine(url, pool_size=pool_size, max_overflow=pool_size, hide_parameters=True)


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


@contextmanager
def _sqlite_migration_lock(engine: Engine) -> Iterator[None]:
    """An exclusive fcntl lock on a file next to the SQLite database, held while migrating: SQLite has no
    advisory lock, and two processes checking "is alembic_version there?" at once both create the tables."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    lock_path = Path(database).with_name(Path(database).name + ".migrate.lock")
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a+b") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # released when the file closes, even if the process dies
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest migration (safe to call from several processes at once: PostgreSQL
    serialises on an advisory lock, SQLite on a file lock next to the database)."""
    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with _sqlite_migration_lock(engine), engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            # Serialise concurrent start-ups (bot and workers) on one advisory lock.
            connection.exec_driver_sql("SELECT pg_advisory_xact_lock(727274)")
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def pending_migrations(engine: Engine) -> list[str]:
    """Revisions not yet applied (for `relmon doctor`)."""
    script = ScriptDirectory.from_config(alembic_config(engine.url.render_as_string(hide_password=False)))
    with engine.connect() as connection:
        current = set(MigrationContext.configure(connection).get_current_heads())
    heads = set(script.get_heads())
    if current == heads:
        return []
    return [rev.revision for rev in script.walk_revisions() if rev.revision not in current]


class Database:
    """The engine and a session factory for one database URL."""

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = url
        self.engine = make_engine(url, pool_size=pool_size)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    def migrate(self) -> None:
        migrate(self.engine)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session whose transaction commits on success and rolls back on error."""
        with self._sessions.begin() as session:
            yield session

    @contextmanager
    def autocommit(self) -> Iterator[Connection]:
        """A connection whose every statement commits on its own: for reads and single atomic statements on the
        hot path, which then cost one round trip each instead of BEGIN, the statement and COMMIT."""
        with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            yield connection

    def dispose(self) -> None:
        self.engine.dispose()
