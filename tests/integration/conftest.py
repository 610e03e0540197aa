"""Fixtures shared by the integration tests."""

from __future__ import annotations

import pytest

from tests.bot_harness import BotServer, ServedBot, bot_settings


@pytest.fixture
def make_bot(redis_url, db_url, slack):
    """`make_bot(**settings)`: a bot served over HTTP on the test's Redis, database and the module's `slack` fake,
    stopped at teardown."""
    servers = []

    def make(**overrides) -> ServedBot:
        settings = bot_settings(redis_url=redis_url, database_url=db_url, slack_api_url=slack.api_url, **overrides)
        server = BotServer(settings)
        servers.append(server)
        return server.__enter__()

    yield make
    for server in servers:
        server.__exit__()
