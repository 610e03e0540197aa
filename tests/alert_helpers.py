"""Shared set-up for the alert and command tests: a Runtime on FakeSlack, Redis and a real database,
and rows shaped as the pipeline stores them."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from common.runtime import Runtime
from store.db import Database
from store.models import Judgment, Pair
from store.settings import Settings
from tests.fakes.slack_server import FakeSlack
from tests.runtimes import installed_runtime

SUPPORT = "C_SUPPORT"
ALERTS = "C_ALERTS"
_answer_counter = itertools.count(1)


def make_settings(*, redis_url: str, database_url: str, slack_api_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "slack_bot_token": "xoxb-test-token",
        "slack_signing_secret": "test-signing-secret",
        "slack_api_url": slack_api_url,
        "redis_url": redis_url,
        "database_url": database_url,
        "monitored_bots": ["B_SUPPORT"],
        "alert_channel": ALERTS,
        "openai_api_key": "sk-test",
        # Alerts on the first verdict: the tests of the second opinion turn it on with a fake LLM.
        "confirm": "off",
        # Each redraw at once: the tests of what a redraw shows; the coalescing has tests of its own.
        "alert_redraw_seconds": 0,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)


def write_rules(directory: Path, rules: dict) -> Path:
    path = directory / "rules.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    return path


@contextmanager
def alert_runtime(settings: Settings) -> Iterator[Runtime]:
    """The process runtime the tasks use, installed for the test and removed after."""
    Database(settings.resolved_database_url).migrate()
    with installed_runtime(settings, worker=True) as runtime:
        yield runtime


def add_judgment(
    runtime: Runtime,
    *,
    score: float | None,
    judge: str = "relevancy",
    status: str = "ok",
    channel_id: str = SUPPORT,
    private: bool = False,
    answer_ts: str | None = None,
    thread_ts: str | None = None,
    question: str = "How do I reset my password?",
    answer: str = "Our office is open 9 to 5.",
    reasoning: str = "The answer talks about opening hours, not passwords.",
    max_score: float = 4,
    source: str = "capture",
    created_at: datetime | None = None,
) -> int:
    with runtime.db.session() as session:
        pair = Pair(
            source=source,
            channel_id=channel_id,
            channel_is_private=private,
            answer_ts=answer_ts or f"{int(datetime.now(UTC).timestamp())}.{next(_answer_counter):06d}",
            thread_ts=thread_ts,
            question_text=question,
            answer_text=answer,
            status="judged",
        )
        session.add(pair)
        session.flush()
        judgment = Judgment(
            pair_id=pair.id,
            judge=judge,
            status=status,
            score=score,
            max_score=max_score,
            normalized_score=None if score is None else score / max_score,
            reasoning=reasoning,
            model="test-model",
            created_at=created_at or datetime.now(UTC),
        )
        session.add(judgment)
        session.flush()
        return judgment.id


def blocks_text(message: dict) -> str:
    return json.dumps(message.get("blocks"))


def fake_slack() -> FakeSlack:
    fake = FakeSlack()
    fake.add_channel(SUPPORT, "support", members=["U_ASKER", "U_RELMON"])
    fake.add_channel(ALERTS, "alerts", members=["U_ASKER", "U_RELMON"])
    return fake
