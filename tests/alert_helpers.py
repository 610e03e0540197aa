"""Shared set-up for the alert and command tests: the fake Slack's channels, a rules file, rows shaped as the
pipeline stores them (the runtime: tests.builders), and the alert tests' autouse `one_hour`."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from sqlalchemy import select

from common.runtime import Runtime
from store.models import Alert, Judgment, Pair
from tests.builders import ALERTS
from tests.fakes.slack_server import FakeSlack
from tests.processes import clear_of_the_hour_turn
from workers.alerts.policy import AlertPlan, ChannelPolicy, JudgmentFacts, complete, low_intent

SUPPORT = "C_SUPPORT"
SOURCES = [f"C_SOURCE{i}" for i in range(6)]  # source channels sharing one alert channel
_answer_counter = itertools.count(1)


@pytest.fixture(autouse=True)
def one_hour():
    """The caps these tests fill count per UTC hour. Autouse where a module binds it (the test_alert_*.py modules:
    `one_hour = alert_helpers.one_hour`)."""
    clear_of_the_hour_turn(20)


def write_rules(directory: Path, rules: dict) -> Path:
    path = directory / "rules.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    return path


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


def on_demand_pair(runtime: Runtime, response_url: str | None) -> int:
    """A judged `/judge` pair asked for by U_ASKER in #support, with its response_url (its judgment not added)."""
    with runtime.db.session() as session:
        pair = Pair(
            source="command",
            channel_id=SUPPORT,
            question_text="How do I reset my password?",
            answer_text="offtopic",
            status="judged",
            requested_by="U_ASKER",
            response_url=response_url,
        )
        session.add(pair)
        session.flush()
        return pair.id


def alerts(runtime: Runtime) -> list[Alert]:
    with runtime.db.session() as session:
        return list(session.execute(select(Alert).order_by(Alert.id)).scalars())


def blocks_text(message: dict) -> str:
    return json.dumps(message.get("blocks"))


def fake_slack() -> FakeSlack:
    fake = FakeSlack()
    fake.add_channel(SUPPORT, "support", members=["U_ASKER", "U_RELMON"])
    fake.add_channel(ALERTS, "alerts", members=["U_ASKER", "U_RELMON"])
    return fake


def plan(facts: JudgmentFacts, policy: ChannelPolicy, **completing) -> AlertPlan:
    """Every alert decision about one judgment at once, as the alert task makes them in turn (`low_intent`, then
    `complete` with `counts`, `low_claimed`, `degradation` and `now`)."""
    return complete(low_intent(facts, policy), facts, policy, **completing)
