"""Engine, sessions and migrations. Alembic migrations run at start-up (`migrate`).

Alembic is imported only where a migration runs or is checked: the bot migrates in a short-lived child process
(`migrate_in_child`), so the processes that serve Slack never load it (about 10 MB each, with its templates)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, sessionmaker

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def dialect_name(executor: Engine | Connection | Session) -> str:
    """The executor's database's dialect: "postgresql" or "sqlite"."""
    bind = executor.get_bind() if isinstance(executor, Session) else executor
    return bind.dialect.name


def insert_for(dialect: str):
    """The dialect's INSERT (PostgreSQL or SQLite), the one with ON CONFLICT clauses."""
    return postgresql.insert if dialect == "postgresql" else sqlite.insert


def dialect_insert(executor: Connection | Session):
    """The executor's database's INSERT (PostgreSQL or SQLite), the one with ON CONFLICT clauses."""
    return insert_for(dialect_name(executor))


@cache
def _ignoring_insert(dialect: str, table, keys: tuple[str, ...], returning: str):
    return insert_for(dialect)(table).on_conflict_do_nothing(index_elements=list(keys)).returning(table.c[returning])


def insert_or_ignore_returning(executor: Connection | Session, model: type, keys: list[str], returning: str):
    """`insert_or_ignore` built once per table (executed with the row as its parameters): on the hot paths,
    building the statement per row cost more CPU than running it. Returns `returning` of the row it inserted."""
    return _ignoring_insert(dialect_name(executor), model.__table__, tuple(keys), returning)


def insert_or_ignore(executor: Connection | Session, model: type, keys: list[str], values: dict[str, Any]):
    """INSERT ... ON CONFLICT (keys) DO NOTHING: a retried or duplicated write meets the row its twin stored and
    adds nothing. Add `.returning(...)` to learn whether this one inserted (rowcount is -1 under psycopg)."""
    return dialect_insert(executor)(model).values(**values).on_conflict_do_nothing(index_elements=keys)


@contextmanager
def autocommit(engine: Engine) -> Iterator[Connection]:
    """`Database.autocommit` for code handed the engine alone."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        yield connection


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
    # every pooled connection of that age at once, and the failed task retries (OperationalError).
    # Plans made for each statement's own values: psycopg prepares a statement run five times, and PostgreSQL's
    # generic plan for it, on tables without statistics yet (a young database), seq-scanned judgments once per
    # judgment for the read after every judgment (`pair_id = ANY(...)`), so the cost grew with the table.
    return create_engine(
        url,
        pool_size=pool_size,
        max_overflow=pool_size,
        hide_parameters=True,
        connect_args={"options": "-c plan_cache_mode=force_custom_plan"},
    )


def alembic_config(url: str) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def sqlite_file(engine: Engine) -> Path | None:
    """The file of a SQLite database; None for another database, or for SQLite in memory."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    return Path(database)


@contextmanager
def _sqlite_migration_lock(engine: Engine) -> Iterator[None]:
    """An exclusive fcntl lock on a file next to the SQLite database, held while migrating: SQLite has no
    advisory lock, and two processes checking "is alembic_version there?" at once both create the tables."""
    database = sqlite_file(engine)
    if database is None:
        yield
        return
    lock_path = database.with_name(database.name + ".migrate.lock")
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
    from alembic import command

    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with _sqlite_migration_lock(engine), engine.begin() as connection:
        if engine.dialect.name == "postgresql":
            # Serialise concurrent start-ups (bot and workers) on one advisory lock.
            connection.exec_driver_sql("SELECT pg_advisory_xact_lock(727274)")
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def pending_migrations(engine: Engine) -> list[str]:
    """Revisions not yet applied (for `relmon doctor`)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config(engine.url.render_as_string(hide_password=False)))
    with engine.connect() as connection:
        current = set(MigrationContext.configure(connection).get_current_heads())
    heads = set(script.get_heads())
    if current == heads:
        return []
    return [rev.revision for rev in script.walk_revisions() if rev.revision not in current]


class MigrationError(RuntimeError):
    """The schema could not be brought up to date (the database unreachable, refused, or a migration failed)."""


def migrate_url(url: str) -> None:
    """`migrate` the database at `url` through a short-lived engine of its own."""
    database = Database(url, pool_size=1)
    try:
        database.migrate()
    finally:
        database.dispose()


def _migrate_child_main() -> None:
    """The child of `migrate_in_child`: the URL arrives on stdin (not argv, which `ps` shows), the problem, if
    any, leaves on stdout as one line (reported by the parent, in its own words)."""
    try:
        migrate_url(sys.stdin.read())
    except Exception as error:
        print(f"{type(error).__name__}: {' '.join(str(error).split())}")
        sys.exit(1)


def migrate_in_child(url: str, timeout_seconds: float = 600) -> None:
    """`migrate` in a short-lived Python process: the caller never imports Alembic (nor keeps a helper process
    around, as multiprocessing's spawn would: its resource tracker)."""
    try:
        child = subprocess.run(
            [sys.executable, "-c", "from store.db import _migrate_child_main; _migrate_child_main()"],
            input=url,
            capture_output=True,
            text=True,
            timeout=timeout_seconds,
        )
    except subprocess.TimeoutExpired:
        raise MigrationError(f"the migration did not finish within {timeout_seconds:g} s") from None
    if child.returncode != 0:
        lines = (child.stdout.strip() or child.stderr.strip()).splitlines()
        raise MigrationError(lines[-1] if lines else f"the migration exited with code {child.returncode}")


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
    def reading(self) -> Iterator[Session]:
        """A session for reads alone, on an autocommit connection: each read costs its own round trip and no
        BEGIN or COMMIT around them (what it flushes, if anything, commits statement by statement)."""
        with self.autocommit() as connection, Session(bind=connection, expire_on_commit=False) as session:
            yield session

    @contextmanager
    def autocommit(self) -> Iterator[Connection]:
        """A connection whose every statement commits on its own: for reads and single atomic statements on the
        hot path, which then cost one round trip each instead of BEGIN, the statement and COMMIT."""
        with autocommit(self.engine) as connection:
            yield connection

    def dispose(self) -> None:
        self.engine.dispose()
