"""Shared fixtures: real Redis, real SQL databases (SQLite and PostgreSQL), and the local fakes."""

from __future__ import annotations

import io
import os
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from common.runtime import Runtime
from store.db import Database
from store.settings import Settings
from tests.alert_helpers import fake_slack
from tests.builders import installed_runtime, make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.log_capture import captured_logs
from tests.services import (
    RedisProcess,
    create_postgres_database,
    drop_postgres_database,
    postgres_admin_url,
)

IN_CI = os.environ.get("CI") == "true"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """RELMON_TEST_PHASE=parallel runs every test but those marked `serial` (they restart a shared service);
    =serial runs only those. scripts/test.sh runs the first with several workers, then the second alone."""
    phase = os.environ.get("RELMON_TEST_PHASE")
    if phase in ("parallel", "serial"):
        wanted = phase == "serial"
        keep = [item for item in items if (item.get_closest_marker("serial") is not None) == wanted]
        dropped = [item for item in items if (item.get_closest_marker("serial") is not None) != wanted]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep
    _longest_modules_first(items)


def _longest_modules_first(items: list[pytest.Item]) -> None:
    """Modules with the most `slow` tests (real processes, leases of 30 s) first, then the largest: the order the
    test workers take modules in (scripts/test.sh: loadscope, not reordered), so that no minute-long module
    starts last and runs alone. Each module's own order is kept (the sort is stable)."""
    module = {id(item): item.nodeid.split("::")[0] for item in items}
    slow = Counter(module[id(item)] for item in items if item.get_closest_marker("slow") is not None)
    size = Counter(module.values())
    items.sort(key=lambda item: (-slow[module[id(item)]], -size[module[id(item)]]))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """A redis-server process owned by the test session (tests may restart it)."""
    server = RedisProcess(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisProcess) -> str:
    if redis_server.process is None or redis_server.process.poll() is not None:
        redis_server.start()
    redis_server.flush()
    return redis_server.url


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this session; skipped locally when no server answers, fatal in CI."""
    admin = postgres_admin_url()
    if admin is None:
        if IN_CI:
            pytest.fail("PostgreSQL is required in CI (set RELMON_TEST_POSTGRES_URL)")
        pytest.skip("no PostgreSQL server (set RELMON_TEST_POSTGRES_URL)")
    url, name = create_postgres_database(admin)
    yield url
    drop_postgres_database(admin, name)


def _reset(database: Database) -> None:
    from store.models import Base

    with database.engine.begin() as connection:
        for table in reversed(Base.metadata.sorted_tables):
            connection.execute(table.delete())


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once per test process: each test gets a copy (migrating took 0.5-0.9 s a test)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "relmon.sqlite3"
    database = Database(f"sqlite:///{path}")
    database.migrate()
    database.dispose()
    return path


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database: once on SQLite, once on PostgreSQL."""
    if request.param == "sqlite":
        path = tmp_path / "relmon.sqlite3"
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), path)
        yield f"sqlite:///{path}"
        return
    url = request.getfixturevalue("postgres_url")
    database = Database(url)
    database.migrate()
    _reset(database)
    database.dispose()
    yield url


@pytest.fixture
def database(db_url: str) -> Iterator[Database]:
    database = Database(db_url)
    yield database
    database.dispose()


@pytest.fixture
def settings_for(redis_url: str, db_url: str) -> Callable[..., Settings]:
    """`settings_for(**values)`: tests.builders.make_settings on this test's Redis and database, `values` on top."""
    return lambda **values: make_settings(**{"redis_url": redis_url, "database_url": db_url, **values})


@pytest.fixture
def runtime_for() -> Iterator[Callable[..., Runtime]]:
    """`runtime_for(settings)`: a Runtime for these settings (tests.builders.make_settings), installed as the
    process runtime (tests.builders.installed_runtime); removed at teardown, with the databases it opened disposed."""
    with ExitStack() as stack:
        yield lambda settings: stack.enter_context(installed_runtime(settings))


@pytest.fixture
def runtime_on(settings_for, runtime_for) -> Callable[..., Runtime]:
    """`runtime_on(url, slack_url="", **settings)`: the process runtime sending its traces to Langfuse at `url` (the
    tracing tests: tests/integration/test_traces_langfuse.py, tests/system/test_traces_phoenix.py)."""

    def build(url: str, slack_url: str = "", **overrides) -> Runtime:
        tracing = {
            "trace_id_from": "slack_ts",
            "langfuse_host": url,
            "langfuse_public_key": "pk-lf-test",
            "langfuse_secret_key": "sk-lf-test",
            "trace_send_retries": 3,
        }
        slack = {"slack_api_url": slack_url} if slack_url else {}
        return runtime_for(settings_for(**{**slack, **tracing, **overrides}))

    return build


@pytest.fixture
def capture_logs() -> Iterator[Callable[..., io.StringIO]]:
    """`capture_logs(level="INFO", **settings)`: relmon's JSON logging on a fresh stream (tests.log_capture)."""
    with captured_logs() as start:
        yield start


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    """The fake Slack of the alert tests: a support channel and the alert channel (tests.alert_helpers.fake_slack)."""
    with fake_slack() as server:
        yield server


@pytest.fixture
def llm() -> Iterator[FakeOpenAI]:
    """The fake OpenAI-compatible server, on its defaults."""
    with FakeOpenAI() as server:
        yield server
