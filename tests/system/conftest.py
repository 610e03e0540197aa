"""Fixtures for the system tests (relmon's own processes)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest
from celery import Celery

from common.celery_app import create_celery
from tests.builders import make_settings
from tests.running_system import System, fresh_database, running_system


@pytest.fixture
def producer(redis_url: str) -> Iterator[Celery]:
    """A Celery app on the test's Redis that only publishes, as the bot does; closed at teardown."""
    app = create_celery(make_settings(redis_url=redis_url), redis_url)
    yield app
    app.close()


@pytest.fixture
def fresh_db_url(tmp_path: Path) -> Iterator[str]:
    """One migrated database for the test, PostgreSQL when a server answers, else SQLite: worker start-up is the
    slow part, so these tests run once, not once per database (as `db_url` would)."""
    with fresh_database(tmp_path) as url:
        yield url


@pytest.fixture
def make_system(redis_url: str, fresh_db_url: str, tmp_path: Path) -> Iterator[Callable[..., System]]:
    """`make_system(**options)`: a running system (tests.running_system.running_system) on the test's Redis and
    fresh database, stopped at teardown."""
    with ExitStack() as stack:
        yield lambda **options: stack.enter_context(
            running_system(redis_url=redis_url, database_url=fresh_db_url, directory=tmp_path, **options)
        )
