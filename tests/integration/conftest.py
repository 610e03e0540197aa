"""Fixtures shared by the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from slack_sdk import WebClient

from common import celery_app, task_names
from tests.bot_harness import BotServer, ServedBot
from tests.builders import installed_runtime
from tests.fakes.langfuse_server import FakeLangfuse
from tests.fakes.slack_server import FakeSlack


@pytest.fixture
def slack():
    """The fake Slack with one asker in one support channel; a module that needs more defines its own."""
    with FakeSlack() as fake:
        fake.add_user("U_ASKER", "ana", "Ana Diaz")
        fake.add_channel("C_SUPPORT", "support", members=["U_ASKER", "U_RELMON"])
        yield fake


@pytest.fixture
def client(slack: FakeSlack) -> WebClient:
    """slack_sdk's WebClient on the module's `slack` fake."""
    return WebClient(token="xoxb-test", base_url=slack.api_url, timeout=5)


@pytest.fixture
def settles(monkeypatch) -> list[tuple[list, int | None]]:
    """The settle tasks sent (args, countdown), kept instead of queued; every other task is sent as usual."""
    sent: list[tuple[list, int | None]] = []
    original = celery_app.celery.send_task

    def record(name, args=None, kwargs=None, countdown=None, **options):
        if name == task_names.SETTLE_PAIR:
            sent.append((list(args or []), countdown))
            return None
        return original(name, args=args, kwargs=kwargs, countdown=countdown, **options)

    monkeypatch.setattr(celery_app.celery, "send_task", record)
    return sent


@pytest.fixture
def make_bot(settings_for, slack):
    """`make_bot(**settings)`: a bot served over HTTP on the test's Redis, database and the module's `slack` fake,
    stopped at teardown."""
    servers = []

    def make(**overrides) -> ServedBot:
        settings = settings_for(slack_api_url=slack.api_url, **overrides)
        server = BotServer(settings)
        servers.append(server)
        return server.__enter__()

    yield make
    for server in servers:
        server.__exit__()


@pytest.fixture
def bot(make_bot) -> ServedBot:
    """The bot on its default settings (`make_bot()`); a module whose bot differs defines its own."""
    return make_bot()


@pytest.fixture
def bot_keeping_settles(make_bot, settles) -> ServedBot:
    """The bot on its default settings, its settle tasks kept in `settles` instead of queued."""
    return make_bot()


@pytest.fixture
def make_runtime(settings_for, fake):
    """`make_runtime(**settings)`: an installed runtime on the test's Redis, database and the alert tests' `fake`
    Slack (tests/conftest.py); a module that needs more defines its own."""

    def build(**overrides):
        settings = settings_for(slack_api_url=fake.api_url, **overrides)
        return installed_runtime(settings)

    return build


@pytest.fixture
def runtime(settings_for, fake, runtime_for):
    """The process runtime on the test's Redis (flushed for the test: redis_url), database and the alert tests'
    `fake` Slack (tests/conftest.py); a module that needs another defines its own."""
    settings = settings_for(slack_api_url=fake.api_url)
    return runtime_for(settings)


@pytest.fixture
def langfuse() -> Iterator[FakeLangfuse]:
    """The fake Langfuse (tests/fakes/langfuse_server.py), for the tracing tests."""
    with FakeLangfuse() as fake:
        yield fake
