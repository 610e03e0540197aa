"""A change alert's message (common.messages.change_alerts) and what groups an answer counts in
(workers.alerts.changes.report_key, topic_group): pure, from plain data."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from common.messages.change_alerts import ChangeAlert, Example, change_alert, headline
from store.change_reads import JudgedAnswer
from workers.alerts.changes import TOPIC_PREFIX, report_key, topic_group

SINCE = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)  # a Tuesday; 10:00 in Paris


def alert(**values) -> ChangeAlert:
    fields = {
        "kind": "topic",
        "group": "t-refunds",
        "name": "Refunds",
        "baseline": 0.09,
        "baseline_n": 900,
        "since": SINCE,
        "n": 48,
        "failed": 15,
        "examples": tuple(Example(f"https://example.slack.com/archives/C1/p{i}") for i in range(5)),
        "false_alarms_per_month": 0.5,
        "timezone": "Europe/Paris",
    }
    return ChangeAlert(**{**fields, **values})


def test_the_headline_gives_baseline_rate_since_n_and_examples():
    assert headline(alert()) == "Topic “Refunds”: 9% → 31% of answers failed since Tue 1 Dec 10:00, n=48; 5 examples"


def test_a_channel_is_mentioned_and_a_bot_named():
    assert headline(alert(kind="channel", group="C1", name=None)).startswith("<#C1>: 9% → 31%")
    assert headline(alert(kind="bot", group="bot:helpdesk", name=None)).startswith("helpdesk (bot conversations): ")


def test_the_message_has_the_interval_the_baseline_and_links_never_quotes():
    message = change_alert(
        alert(examples=(Example("https://x/p1"), Example(None, "private"), Example(None, "exchange")))
    )
    text = json.dumps(message["blocks"], ensure_ascii=False)
    assert "15 failed of 48 answers, 31% (20–45%, n=48)" in text
    assert "baseline of *9%* (from 900 earlier answers)" in text
    assert "<https://x/p1|answer 1>" in text
    assert "answer 2 (an answer in a private channel: not linked here)" in text
    assert "answer 3 (a bot conversation (no Slack message to link))" in text
    assert "at most 0.5 false alarms per month" in text
    assert message["text"].endswith("n=48; 3 examples")


def test_the_evidence_survives_the_alert_row():
    details = {
        "group_kind": "channel",
        "group": "C1",
        "topic_name": None,
        "baseline": 0.1,
        "baseline_n": 300,
        "since": SINCE.isoformat(),
        "n": 20,
        "failed": 9,
        "examples": [{"link": "https://x/p", "why_not": None}],
        "false_alarms_per_month": 0.5,
    }
    restored = ChangeAlert.of_details(json.loads(json.dumps(details)), "UTC")
    assert headline(restored) == "<#C1>: 10% → 45% of answers failed since Tue 1 Dec 09:00, n=20; 1 example"


def answer(**values) -> JudgedAnswer:
    fields = {
        "judgment_id": 1,
        "pair_id": 1,
        "score": 1.0,
        "judged_at": SINCE,
        "channel_id": "C1",
        "channel_is_private": False,
        "answer_ts": "1.0",
        "bot": None,
        "visibility": None,
        "topic_key": None,
    }
    return JudgedAnswer(**{**fields, **values})


def groups_of(answer: JudgedAnswer) -> list[str | None]:
    return [report_key(answer), topic_group(answer)]


def test_an_answer_counts_for_its_channel_its_bot_and_its_public_topic():
    assert groups_of(answer()) == ["C1", None]
    assert groups_of(answer(topic_key="t")) == ["C1", TOPIC_PREFIX + "t"]
    assert groups_of(answer(channel_id=None, bot="helpdesk", visibility="public", topic_key="t")) == [
        "bot:helpdesk",
        TOPIC_PREFIX + "t",
    ]


def test_a_private_answer_never_feeds_a_topic():
    assert groups_of(answer(channel_is_private=True, topic_key="t")) == ["C1", None]
    assert groups_of(answer(channel_id=None, bot="helpdesk", visibility="dm", topic_key="t")) == ["bot:helpdesk", None]
    assert groups_of(answer(channel_id=None, bot=None)) == [None, None]
