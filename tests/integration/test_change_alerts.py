"""Change alerts end to end: judged pairs stored as the pipeline stores them, beat's tick run as a worker runs it
(`workers.tasks.slack.watch_changes`, in-process) on real Redis and SQLite/PostgreSQL, posting to FakeSlack over
HTTP. A channel's failure rate steps from 10% to 45%: exactly one change alert, with its evidence, however many
ticks see it stay high; a stable channel beside it raises nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from slack_sdk.errors import SlackApiError
from sqlalchemy import select

from store.models import Judgment, Pair
from store.topic_models import PairTopic, TopicRecord
from tests import alert_helpers
from tests.alert_helpers import ALERTS, SUPPORT, alerts
from workers.alerts import changes
from workers.tasks import slack as tasks

one_hour = alert_helpers.one_hour  # autouse (tests/alert_helpers.py)
GAP = timedelta(minutes=48)  # 30 answers a day
QUIET = "C_QUIET"


def store_judged(
    runtime,
    outcomes: list[bool],
    start: datetime,
    channel: str = SUPPORT,
    topic: str | None = None,
    judged_at: datetime | None = None,
):
    """Captured answers judged in order, one every GAP from `start` (judged then, or all at `judged_at`): failed →
    relevancy 1, else 4 (threshold 2)."""
    with runtime.db.session() as session:
        for i, failed in enumerate(outcomes):
            at = start + i * GAP
            pair = Pair(
                source="capture",
                channel_id=channel,
                answer_ts=f"{at.timestamp():.6f}",
                question_text="How do I get a refund?",
                answer_text="Our office is open 9 to 5.",
                status="judged",
            )
            session.add(pair)
            session.flush()
            score = 1.0 if failed else 4.0
            session.add(
                Judgment(
                    pair_id=pair.id,
                    judge="relevancy",
                    status="ok",
                    score=score,
                    max_score=4,
                    created_at=judged_at or at,
                )
            )
            if topic:
                session.add(PairTopic(pair_id=pair.id, topic_key=topic))


def every(count: int, nth: int) -> list[bool]:
    """`count` answers, every `nth` failed (a rate of 1/nth, no chance in it)."""
    return [i % nth == nth - 1 for i in range(count)]


def change_posts(fake) -> list[dict]:
    return [post for post in fake.posted(ALERTS) if "of answers failed since" in post["text"]]


def test_a_rising_failure_rate_posts_one_alert_with_its_evidence(make_runtime, fake):
    fake.add_channel(QUIET, "quiet", members=["U_RELMON"])
    now = datetime.now(UTC)
    with make_runtime(change_alert_min_baseline=200, timezone="Europe/Paris") as runtime:
        baseline, changed = 300, 60
        start = now - (baseline + changed) * GAP
        store_judged(runtime, every(baseline, 10), start)  # 10% failed
        store_judged(runtime, every(baseline + changed, 10), start, channel=QUIET)  # stays at 10%
        assert str(tasks.watch_changes()) == f"read {2 * baseline + changed}, alarms 0, posted 0"
        # Then 45% failed (9 of every 20), fed to the tick a few answers at a time.
        step = [i % 20 in (0, 2, 4, 7, 9, 11, 13, 16, 18) for i in range(changed)]
        for chunk in range(0, changed, 6):
            store_judged(runtime, step[chunk : chunk + 6], start + (baseline + chunk) * GAP)
            tasks.watch_changes()
        [post] = change_posts(fake)
        [row] = [a for a in alerts(runtime) if a.kind == "change"]
        assert (row.status, row.source_channel_id, row.alert_channel_id) == ("posted", SUPPORT, ALERTS)
        details = row.details
        assert abs(details["baseline"] - 0.1) < 0.01 and details["baseline_n"] >= 200
        assert 0.3 <= details["failed"] / details["n"] <= 0.8
        since = datetime.fromisoformat(details["since"])
        assert abs(since - (start + baseline * GAP)) <= 8 * GAP  # the change point, near the step
        blocks = json.dumps(post["blocks"])
        assert post["text"].startswith(f"<#{SUPPORT}>: 10% → ")
        assert f"n={details['n']}; 5 examples" in post["text"]
        assert "of answers failed since" in post["text"] and "(Europe/Paris)" in blocks
        assert blocks.count("https://example.slack.com/archives/C_SUPPORT/p") == 5  # links, never quotes
        assert "refund" not in blocks.lower()

        # Still high on the next ticks: no second alert. The state is kept between ticks (Redis), so nothing is
        # read twice.
        store_judged(runtime, step, start + (baseline + changed) * GAP - timedelta(minutes=1))
        assert str(tasks.watch_changes()) == f"read {changed}, alarms 0, posted 0"
        tasks.watch_changes()
        assert len(change_posts(fake)) == 1


def test_a_topic_s_rise_alerts_under_its_name_once_a_topics_run_assigns_its_answers(make_runtime, fake):
    now = datetime.now(UTC)
    with make_runtime(change_alert_min_baseline=100) as runtime:
        start = now - 200 * GAP
        store_judged(runtime, every(150, 10), start)
        store_judged(runtime, [True, True, False] * 16 + [True, True], start + 150 * GAP)
        tasks.watch_changes()
        assert [post["text"][:14] for post in change_posts(fake)] == ["<#C_SUPPORT>: "]
        # A day later the topics run stores every answer's topic: the next tick feeds the topic's detector.
        with runtime.db.session() as session:
            session.add(TopicRecord(key="t-refunds", name="Refunds", named_by="llm", anchors=[]))
            for pair_id in session.scalars(select(Pair.id)):
                session.add(PairTopic(pair_id=pair_id, topic_key="t-refunds"))
        assert str(tasks.watch_changes()) == "read 200, alarms 1, posted 1"
        texts = [post["text"] for post in change_posts(fake)]
        assert len(texts) == 2 and texts[1].startswith("Topic “Refunds”: 9% → 78% of answers failed since"), texts
        [row] = [a for a in alerts(runtime) if a.kind == "change" and a.source_channel_id is None]
        assert (row.details["group"], row.alert_channel_id) == ("t-refunds", ALERTS)
        assert str(tasks.watch_changes()) == "read 0, alarms 0, posted 0"  # each pair fed to its topic once


def test_the_episode_ends_when_the_rate_is_back_and_the_next_rise_alerts_again(make_runtime, fake):
    now = datetime.now(UTC)
    with make_runtime() as runtime:
        start = now - 1100 * GAP
        rise = [i % 20 in (0, 2, 4, 7, 9, 11, 13, 16, 18) for i in range(60)]  # 45%
        stretches = [every(300, 10), rise, every(600, 10), rise + rise]
        offset = 0
        for stretch in stretches:
            store_judged(runtime, stretch, start + offset * GAP, judged_at=now)
            offset += len(stretch)
            tasks.watch_changes()
        first, second = [a for a in alerts(runtime) if a.kind == "change"]
        assert first.details["recovered_at"] and "recovered_at" not in second.details
        assert datetime.fromisoformat(second.details["since"]) > datetime.fromisoformat(first.details["recovered_at"])
        assert len(change_posts(fake)) == 2


def test_a_backlog_judged_at_once_is_read_in_its_answers_time(make_runtime, fake):
    """Two weeks of answers judged just now (an outage's backlog): the change point is the answers' time."""
    now = datetime.now(UTC)
    with make_runtime() as runtime:
        start = now - 400 * GAP
        store_judged(runtime, every(300, 10) + [i % 2 == 0 for i in range(100)], start, judged_at=now)
        tasks.watch_changes()
        [row] = [a for a in alerts(runtime) if a.kind == "change"]
        since = datetime.fromisoformat(row.details["since"])
        assert abs(since - (start + 300 * GAP)) <= 8 * GAP
        assert len(change_posts(fake)) == 1


def test_a_post_slack_failed_is_made_by_the_next_look_once(make_runtime, fake):
    now = datetime.now(UTC)
    with make_runtime() as runtime:
        store_judged(runtime, every(300, 10) + [i % 2 == 0 for i in range(60)], now - 360 * GAP, judged_at=now)
        fake.refuse("chat.postMessage", "internal_error", times=1)
        with pytest.raises(SlackApiError):
            changes.watch(runtime)  # the task retries: the alarm is claimed, its detector's state saved
        assert not fake.messages[ALERTS]  # refused (the call is recorded, no message)
        assert str(changes.watch(runtime)) == "read 0, alarms 0, posted 1"
        assert str(changes.watch(runtime)) == "read 0, alarms 0, posted 0"
        assert len(fake.messages[ALERTS]) == 1


def test_change_alerts_off_reads_nothing(make_runtime, fake):
    with make_runtime(change_alerts=False) as runtime:
        store_judged(runtime, every(50, 2), datetime.now(UTC) - 50 * GAP)
        assert str(changes.watch(runtime)) == "off"
        assert runtime.redis.get(changes.CURSOR_KEY) is None


def test_a_bot_s_exchanges_in_no_channel_are_its_group(make_runtime, fake):
    """An ingested exchange in no Slack channel counts for its bot (its first exchange's), with its visibility."""
    from store.change_reads import judged_since
    from store.exchange_models import Exchange

    now = datetime.now(UTC)
    with make_runtime() as runtime:
        with runtime.db.session() as session:
            for i, visibility in enumerate(("public", "dm")):
                pair = Pair(source="ingest", channel_id=None, question_text="q", answer_text="a", status="judged")
                session.add(pair)
                session.flush()
                for turn in range(2):  # two exchanges made one pair: read once
                    session.add(
                        Exchange(
                            client_id=f"x{i}-{turn}",
                            bot="helpdesk" if turn == 0 else "other",
                            conversation_id="c",
                            turn=turn,
                            visibility=visibility,
                            asked_at=now,
                            answered_at=now,
                            pair_id=pair.id,
                        )
                    )
                session.add(Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=1.0, max_score=4))
        with runtime.db.reading() as session:
            read = judged_since(session, 0, "relevancy", limit=100)
        assert [(a.bot, a.visibility, changes.report_key(a)) for a in read] == [
            ("helpdesk", "public", "bot:helpdesk"),
            ("helpdesk", "dm", "bot:helpdesk"),
        ]
