"""Retention reaches what relmon posted (workers.retention): past RELMON_RETENTION_DAYS the purge redraws relmon's
alerts, summaries and direct-message verdicts without their words (or deletes them with
RELMON_RETENTION_SLACK=delete) before their rows go, over HTTP to the fake Slack, on SQLite and PostgreSQL; a post
Slack cannot change now keeps its rows for the next purge; response_urls are blanked once their life is over."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from common.runtime import Runtime
from store import alerts as alert_store
from store.models import Alert, Judgment, Pair
from tests.fakes.slack_server import FakeSlack
from workers.tasks.maintenance import purge

ALERTS = "C_ALERTS"
WORDS = "RETMARK9931 my card 4111"  # what the posts quote


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack() as fake:
        fake.add_channel(ALERTS, "alerts", members=["U_RELMON"])
        yield fake


def seed(runtime: Runtime, slack: FakeSlack, created: datetime, tag: str) -> dict[str, str]:
    """A judged pair with a posted low-score alert, a summary and a verdict sent as a direct message, each a message
    in the fake Slack that quotes WORDS; returns their (channel, ts) by kind."""
    posts = {}
    with runtime.db.session() as session:
        pair = Pair(channel_id="C1", answer_ts=f"{tag}.1", question_text=WORDS, status="judged", created_at=created)
        session.add(pair)
        session.flush()
        judgment = Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=0, reasoning=WORDS)
        session.add(judgment)
        session.flush()
        for kind, channel, judgment_id in (
            (alert_store.KIND_LOW, ALERTS, judgment.id),
            (alert_store.KIND_SUMMARY, ALERTS, None),
            (alert_store.KIND_VERDICT, f"D_{tag}", None),
        ):
            ts = f"{tag}.{len(posts) + 2}"
            slack.add_message(channel, ts, text=f"{kind}: {WORDS}", bot_id="B_RELMON")
            details = {"dm_channel": channel} if kind == alert_store.KIND_VERDICT else {}
            session.add(
                Alert(
                    dedupe_key=f"{kind}:{tag}",
                    kind=kind,
                    judgment_id=judgment_id,
                    alert_channel_id=ALERTS if kind != alert_store.KIND_VERDICT else "U_ASKER",
                    status=alert_store.STATUS_POSTED,
                    message_ts=ts,
                    details=details,
                    created_at=created,
                )
            )
            posts[kind] = (channel, ts)
    return posts


def on_demand(runtime: Runtime, slack: FakeSlack, created: datetime, key: str) -> int:
    with runtime.db.session() as session:
        pair = Pair(source="command", status="judged", response_url=slack.response_url(key), created_at=created)
        session.add(pair)
        session.flush()
        return pair.id


def rows(runtime: Runtime, model) -> int:
    with runtime.db.session() as session:
        return session.execute(select(func.count()).select_from(model)).scalar_one()


def test_the_retention_purge_takes_out_only_what_is_past_its_time(runtime_for, settings_for, slack: FakeSlack) -> None:
    runtime = runtime_for(settings_for(slack_api_url=slack.api_url, retention_days=30))
    now = datetime.now(UTC)
    old = seed(runtime, slack, now - timedelta(days=31), "1700000000")
    recent = seed(runtime, slack, now - timedelta(days=2), "1800000000")
    stale_url = on_demand(runtime, slack, now - timedelta(hours=2), "stale")
    live_url = on_demand(runtime, slack, now - timedelta(minutes=5), "live")

    counts = purge(runtime, now)

    assert counts["posts"] == 3 and counts["pairs"] == 1 and counts["response_urls"] == 1
    for channel, ts in old.values():
        shown = json.dumps(slack.messages[channel][ts])
        assert "RETMARK9931" not in shown and "4111" not in shown
        assert "words were removed after 30 days" in shown
    for channel, ts in recent.values():
        assert "RETMARK9931" in slack.messages[channel][ts]["text"]  # within retention: untouched
    assert rows(runtime, Pair) == 3  # the recent pair and the two on-demand ones
    with runtime.db.session() as session:
        assert session.get(Pair, stale_url).response_url is None
        assert session.get(Pair, live_url).response_url == slack.response_url("live")
    assert all("RETMARK" not in json.dumps(params) for _, params in slack.calls)  # never sent again


def test_with_retention_slack_delete_the_posts_are_deleted(runtime_for, settings_for, slack: FakeSlack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, RELMON_RETENTION_SLACK="delete")
    runtime = runtime_for(settings)
    now = datetime.now(UTC)
    old = seed(runtime, slack, now - timedelta(days=91), "1700000000")
    assert purge(runtime, now)["posts"] == 3
    for channel, ts in old.values():
        assert ts not in slack.messages.get(channel, {})
    assert len(slack.calls_to("chat.delete")) == 3 and not slack.calls_to("chat.update")
    assert rows(runtime, Pair) == 0 and rows(runtime, Alert) == 0


def test_a_post_slack_cannot_change_now_keeps_its_rows_for_the_next_purge(
    runtime_for, settings_for, slack: FakeSlack
) -> None:
    runtime = runtime_for(settings_for(slack_api_url=slack.api_url, retention_days=30))
    now = datetime.now(UTC)
    old = seed(runtime, slack, now - timedelta(days=31), "1700000000")
    slack.refuse("chat.update", "internal_error", times=1)  # Slack failing for a moment
    counts = purge(runtime, now)
    assert counts["posts"] == 0 and counts["pairs"] == 0  # its row is where the post is: kept
    assert rows(runtime, Alert) == 3
    counts = purge(runtime, now)  # the next day
    assert counts["posts"] == 3 and counts["pairs"] == 1 and rows(runtime, Alert) == 0
    for channel, ts in old.values():
        assert "RETMARK9931" not in json.dumps(slack.messages[channel][ts])
