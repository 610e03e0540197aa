"""The Slack tasks run in-process against FakeSlack (real HTTP), real Redis and SQLite/PostgreSQL:
at most one alert per judgment (retries, twins, a worker that died after claiming), the hourly cap and
its summary, degradation, privacy, 429s, vote tallies and private verdicts."""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime, timedelta
from http.client import RemoteDisconnected
from urllib.error import URLError

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from store import alerts as alert_store
from store.feedback import record_vote
from store.models import Alert, Judgment, Pair
from tests.alert_helpers import ALERTS, SUPPORT, add_judgment, write_rules
from tests.builders import installed_runtime
from tests.bursts import burst
from tests.processes import clear_of_the_hour_turn
from workers.alerts import delivery, redraws, summaries, verdicts
from workers.alerts.policy import hour_label, hour_start
from workers.tasks import slack as tasks


@pytest.fixture(autouse=True)
def one_hour():
    """The caps these tests fill count per UTC hour."""
    clear_of_the_hour_turn(20)


@pytest.fixture
def make_runtime(settings_for, fake):
    def build(**overrides):
        settings = settings_for(slack_api_url=fake.api_url, **overrides)
        return installed_runtime(settings)

    return build


def alerts(runtime) -> list[Alert]:
    with runtime.db.session() as session:
        return list(session.execute(select(Alert).order_by(Alert.id)).scalars())


def test_low_score_posts_exactly_one_alert_even_when_repeated(make_runtime, fake):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=1)
        assert delivery.consider(runtime, judgment_id).low == "posted"
        assert delivery.consider(runtime, judgment_id).low == "posted"  # a retry or redelivery
        tasks.consider_alert(judgment_id)  # the Celery task body, as a worker runs it
        posts = fake.posted(ALERTS)
        assert len(posts) == 1
        blocks = json.loads(posts[0]["blocks"]) if isinstance(posts[0]["blocks"], str) else posts[0]["blocks"]
        assert blocks[0]["text"]["text"] == "Low relevancy score: 1 / 4"
        text = json.dumps(blocks)
        assert "How do I reset my password?" in text and "opening hours" in text and f"<#{SUPPORT}>" in text
        actions = next(b for b in blocks if b["type"] == "actions")["elements"]
        assert [a["action_id"] for a in actions] == ["open_message", "feedback_right", "feedback_wrong", "golden_add"]
        assert actions[0]["url"].startswith(f"https://example.slack.com/archives/{SUPPORT}/p")
        assert actions[1]["value"] == str(judgment_id)
        [row] = alerts(runtime)
        assert (row.kind, row.status, row.dedupe_key) == ("low_score", "posted", f"low:{judgment_id}")
        assert row.message_ts in fake.messages[ALERTS]  # kept for chat.update


@pytest.mark.parametrize(
    ("score", "status", "judge"),
    [(3, "ok", "relevancy"), (4, "ok", "relevancy"), (None, "error", "relevancy"), (None, "null", "grounded")],
)
def test_no_alert_for_a_judgment_that_is_not_a_low_score(make_runtime, fake, score, status, judge):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=score, status=status, judge=judge)
        delivery.consider(runtime, judgment_id)
        assert fake.posted(ALERTS) == [] and alerts(runtime) == []


def test_claimed_but_unposted_alert_is_posted_by_the_retry(make_runtime, fake):
    """A worker claimed the alert and died before posting: the redelivered task posts it, once."""
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0)
        with runtime.db.session() as session:
            alert_store.claim(
                session,
                dedupe_key=f"low:{judgment_id}",
                kind="low_score",
                judgment_id=judgment_id,
                source_channel_id=SUPPORT,
                alert_channel_id=ALERTS,
            )
        assert fake.posted(ALERTS) == []
        delivery.consider(runtime, judgment_id)
        delivery.consider(runtime, judgment_id)
        assert len(fake.posted(ALERTS)) == 1
        assert alerts(runtime)[0].status == "posted"


def test_twin_workers_on_one_judgment_post_once(make_runtime, fake):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0)
        fake.rate_limit("chat.postMessage", times=1, retry_after=1)  # the first poster is slow: the twin must wait
        burst(lambda _: delivery.consider(runtime, judgment_id), range(4), workers=4)  # none raises
        # the 429 was waited out (Retry-After) and retried: two calls, one message in the channel
        assert len(fake.calls_to("chat.postMessage")) == 2
        assert len(fake.messages[ALERTS]) == 1


def test_hourly_cap_gathers_the_rest_into_one_summary(make_runtime, fake):
    # the time window off: five bad answers in an hour would also (rightly) post a degradation alert
    with make_runtime(alert_cap_per_hour=2, degradation_window_minutes=0) as runtime:
        ids = [add_judgment(runtime, score=0, reasoning=f"reason {i}") for i in range(5)]
        for judgment_id in ids:
            delivery.consider(runtime, judgment_id)
        assert len(fake.posted(ALERTS)) == 2
        statuses = [row.status for row in alerts(runtime)]
        assert statuses == ["posted", "posted", "held", "held", "held"]

        assert summaries.flush_summaries(runtime) == 1
        summaries.flush_summaries(runtime)  # nothing new: no second post, no update
        posts = fake.posted(ALERTS)
        assert len(posts) == 3 and fake.calls_to("chat.update") == []
        summary = json.dumps(posts[2]["blocks"])
        assert "3 more low scores this hour" in summary and "reason 4" in summary and "cap of 2" in summary

        more = add_judgment(runtime, score=1, reasoning="reason 5")
        delivery.consider(runtime, more)
        summaries.flush_summaries(runtime)
        assert len(fake.posted(ALERTS)) == 3  # still one summary message…
        [update] = fake.calls_to("chat.update")  # …updated in place
        assert "4 more low scores this hour" in json.dumps(update["blocks"])
        summary_rows = [row for row in alerts(runtime) if row.kind == "summary"]
        assert len(summary_rows) == 1 and summary_rows[0].dedupe_key.startswith(f"summary:{ALERTS}:")


def test_cap_holds_under_a_concurrent_burst(make_runtime, fake):
    """Eight workers handle eight low scores at once: the cap of three still holds exactly."""
    with make_runtime(alert_cap_per_hour=3, degradation_window_minutes=0) as runtime:  # no degradation alert here
        ids = [add_judgment(runtime, score=0) for _ in range(8)]
        burst(lambda judgment_id: delivery.consider(runtime, judgment_id), ids, together=True)
        assert len(fake.posted(ALERTS)) == 3
        assert sorted(row.status for row in alerts(runtime)) == ["held"] * 5 + ["posted"] * 3


def judged(runtime, score: float, times: int, **kwargs) -> None:
    """`times` answers judged `score`, each considered for alerts."""
    for _ in range(times):
        delivery.consider(runtime, add_judgment(runtime, score=score, **kwargs))


@pytest.fixture
def count_window(make_runtime):
    """The count window alone (the time window has its own tests): recovery needs every window above the floor.
    Threshold 0: the 1s below are not low-score alerts, only a falling mean."""
    with make_runtime(degradation_window=4, degradation_floor=2.5, threshold=0, degradation_window_minutes=0
                      ) as runtime:  # fmt: skip
        yield runtime


def test_degradation_alerts_when_the_full_window_falls_below_the_floor(count_window, fake):
    judged(count_window, 1, 3)
    assert fake.posted(ALERTS) == []  # fewer answers than the window
    judged(count_window, 1, 1)
    [post] = fake.posted(ALERTS)
    assert "getting worse" in post["text"] and "1.00" in json.dumps(post["blocks"])


def test_a_degraded_channel_is_not_alerted_again_while_it_stays_bad(count_window, fake):
    judged(count_window, 1, 7)
    assert len(fake.posted(ALERTS)) == 1  # still degraded: no repeat


def test_a_recovered_channel_is_rearmed(count_window):
    judged(count_window, 1, 4)
    judged(count_window, 4, 4)
    [row] = [a for a in alerts(count_window) if a.kind == "degradation"]
    assert row.details.get("recovered_at")  # re-armed


def test_a_rearmed_channel_alerts_again_only_in_a_later_hour(count_window, fake):
    runtime = count_window
    judged(runtime, 1, 4)
    judged(runtime, 4, 4)
    judged(runtime, 1, 4)
    assert len(fake.posted(ALERTS)) == 1  # re-armed, but not twice within the hour

    later = datetime.now(UTC) + timedelta(hours=2)
    delivery.consider(runtime, add_judgment(runtime, score=1, created_at=later), now=later)
    assert len(fake.posted(ALERTS)) == 2
    assert [a.dedupe_key for a in alerts(runtime) if a.kind == "degradation"] == [
        f"degr:{SUPPORT}:1",
        f"degr:{SUPPORT}:2",
    ]


def test_private_channel_alert_withholds_text(make_runtime, fake):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0, private=True, question="secret question", answer="secret answer")
        delivery.consider(runtime, judgment_id)
        [post] = fake.posted(ALERTS)
        text = json.dumps(post["blocks"]) + post["text"]
        assert "secret" not in text and "opening hours" not in text
        assert "withheld" in text and "0 / 4" in text and "open_message" in text


def test_private_channel_is_quoted_where_its_rule_allows(make_runtime, fake, tmp_path):
    rules = write_rules(
        tmp_path, {"channels": {"G_PRIVATE": {"alert_channel": "C_PRIVATE_ALERTS", "quote_private": True}}}
    )
    with make_runtime(channel_rules_file=rules) as runtime:
        judgment_id = add_judgment(runtime, score=0, private=True, channel_id="G_PRIVATE", question="secret question")
        delivery.consider(runtime, judgment_id)
        assert fake.posted(ALERTS) == []
        [post] = fake.posted("C_PRIVATE_ALERTS")
        assert "secret question" in json.dumps(post["blocks"])


def test_votes_update_the_posted_alert(make_runtime, fake):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0)
        delivery.consider(runtime, judgment_id)
        [row] = alerts(runtime)
        with runtime.db.session() as session:
            record_vote(session, judgment_id, "U1", "right")
            record_vote(session, judgment_id, "U2", "wrong")
            record_vote(session, judgment_id, "U1", "wrong")  # changed
        assert delivery.refresh_votes(runtime, row.id) == "updated"
        [update] = fake.calls_to("chat.update")
        assert update["channel"] == ALERTS and update["ts"] == row.message_ts
        assert "Feedback: 0 say the judge was right · 2 say it was wrong" in json.dumps(
            update["blocks"], ensure_ascii=False
        )
        # the message in Slack now shows it
        assert "2 say it was wrong" in json.dumps(fake.messages[ALERTS][row.message_ts]["blocks"], ensure_ascii=False)


def test_verdict_goes_privately_to_the_response_url_once(make_runtime, fake):
    with make_runtime() as runtime:
        with runtime.db.session() as session:
            pair = Pair(
                source="command",
                channel_id=SUPPORT,
                question_text="How do I reset my password?",
                answer_text="offtopic",
                status="judged",
                requested_by="U_ASKER",
                response_url=fake.response_url("verdict"),
            )
            session.add(pair)
            session.flush()
            pair_id = pair.id
        add_judgment_for_pair(runtime, pair_id, score=0)
        assert verdicts.deliver(runtime, pair_id) == "response_url"
        assert verdicts.deliver(runtime, pair_id) == "posted"
        [response] = fake.responses["verdict"]
        assert response["response_type"] == "ephemeral"
        assert response["blocks"][0]["text"]["text"] == "Verdict: Relevancy 0 / 4"
        assert fake.posted() == []  # nothing in any channel


def test_verdict_falls_back_to_a_direct_message(make_runtime, fake):
    fake.add_channel(SUPPORT, "support", members=["U_RELMON"])  # U_ASKER left: no ephemeral, a DM is the last resort
    with make_runtime() as runtime:
        with runtime.db.session() as session:
            pair = Pair(source="shortcut", channel_id=SUPPORT, question_text="q", answer_text="a", status="judged",
                        requested_by="U_ASKER", response_url=None)  # fmt: skip
            session.add(pair)
            session.flush()
            pair_id = pair.id
        add_judgment_for_pair(runtime, pair_id, score=3)
        assert verdicts.deliver(runtime, pair_id) == "direct_message"
        [post] = fake.posted("U_ASKER")
        assert "Relevancy 3 / 4" in post["text"]
        with runtime.db.session() as session:  # where it is, for retention to redraw or delete it
            row = alert_store.by_key(session, f"verdict:{pair_id}")
            assert row.message_ts and row.details["dm_channel"]
            assert row.message_ts in fake.messages[row.details["dm_channel"]]


def add_judgment_for_pair(runtime, pair_id: int, score: float) -> None:
    from store.models import Judgment

    with runtime.db.session() as session:
        session.add(Judgment(pair_id=pair_id, judge="relevancy", status="ok", score=score, max_score=4, reasoning="r"))


def test_a_stale_claim_whose_post_reached_slack_is_not_posted_again(make_runtime, fake):
    """A worker posted the alert, then died before recording it: the retry finds the message by the dedupe key
    in its metadata and records it instead of posting a second one."""
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0)
        assert delivery.consider(runtime, judgment_id).low == "posted"
        [posted] = fake.posted(ALERTS)
        metadata = json.loads(posted["metadata"]) if isinstance(posted["metadata"], str) else posted["metadata"]
        assert metadata["event_payload"]["dedupe_key"] == f"low:{judgment_id}"
        [posted_ts] = fake.messages[ALERTS]
        with runtime.db.session() as session:  # as if the worker died before marking it posted, a while ago
            row = session.execute(select(Alert)).scalar_one()
            row.status, row.message_ts = "claimed", None
            row.created_at = datetime.now(UTC) - timedelta(minutes=5)
        runtime.redis.delete(f"relmon:posted:low:{judgment_id}")  # it died before even the Redis receipt
        assert delivery.consider(runtime, judgment_id).low == "posted"
        assert len(fake.posted(ALERTS)) == 1
        [row] = alerts(runtime)
        assert (row.status, row.message_ts) == ("posted", posted_ts)


def test_database_down_after_slack_took_the_post_does_not_post_twice(make_runtime, fake, monkeypatch):
    """Slack accepted the alert, then the database failed before recording it (PostgreSQL restarting): the task
    fails and Celery retries it at once, long before the claim looks stale. The Redis receipt stops a second
    post; the same holds for the hour's summary and for a private verdict."""
    real_mark_posted = alert_store.mark_posted
    failures = []

    def database_gone_once(session, alert_id, message_ts):
        if not failures:
            failures.append(alert_id)
            raise OperationalError("UPDATE alerts", {}, Exception("server closed the connection unexpectedly"))
        return real_mark_posted(session, alert_id, message_ts)

    monkeypatch.setattr(alert_store, "mark_posted", database_gone_once)
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0)
        with pytest.raises(OperationalError):
            delivery.consider(runtime, judgment_id)
        assert len(fake.posted(ALERTS)) == 1
        [row] = alerts(runtime)
        assert row.status == "claimed"  # the database never heard of the post
        assert delivery.consider(runtime, judgment_id).low == "posted"  # the retry
        assert len(fake.posted(ALERTS)) == 1
        [row] = alerts(runtime)
        [posted_ts] = fake.messages[ALERTS]
        assert (row.status, row.message_ts) == ("posted", posted_ts)


# Slack took the post but its answer never came: a timeout, a connection closed after sending ---------------------

CLIENT_TIMEOUT = 1  # seconds (15 in production): the slow answer below comes after it


def post_never_answered(runtime, fake, fault: str) -> type[BaseException]:
    """The next chat.postMessage is carried out by Slack, but the client hears nothing: what the client raises."""
    if fault == "slow":
        runtime.slack.timeout = CLIENT_TIMEOUT
        fake.slow_method("chat.postMessage", CLIENT_TIMEOUT + 1.5)
        return TimeoutError
    fake.drop_method("chat.postMessage")
    return RemoteDisconnected


def metadata_of(post: dict) -> dict:
    return json.loads(post["metadata"]) if isinstance(post["metadata"], str) else post["metadata"]


@pytest.mark.parametrize("fault", ["slow", "drop"])
def test_an_alert_slack_took_without_answering_is_not_posted_again(make_runtime, fake, fault):
    """The client neither re-sends the post by itself (a dropped connection is retried only when nothing was sent)
    nor does the task's retry, seconds later and long before the claim looks stale, post it blind: the first
    attempt noted it was posting, so the retry looks for the marked message in the channel and records it."""
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0)
        raised = post_never_answered(runtime, fake, fault)
        with pytest.raises(raised):
            delivery.consider(runtime, judgment_id)
        assert len(fake.posted(ALERTS)) == 1 and len(fake.messages[ALERTS]) == 1
        assert fake.calls_to("conversations.history") == []  # a first attempt reads no history
        assert delivery.consider(runtime, judgment_id).low == "posted"  # the task's retry
        assert len(fake.posted(ALERTS)) == 1
        assert len(fake.calls_to("conversations.history")) == 1
        [row] = alerts(runtime)
        [posted_ts] = fake.messages[ALERTS]
        assert (row.status, row.message_ts) == ("posted", posted_ts)
        assert delivery.consider(runtime, judgment_id).low == "posted"
        assert len(fake.posted(ALERTS)) == 1 and len(fake.calls_to("conversations.history")) == 1


@pytest.mark.parametrize("fault", ["slow", "drop"])
def test_a_summary_slack_took_without_answering_is_not_posted_again(make_runtime, fake, fault):
    """The hour's summary carries its dedupe key in its metadata, as alerts do, and its retry looks for it."""
    with make_runtime(alert_cap_per_hour=1, degradation_window_minutes=0) as runtime:
        for _ in range(2):
            delivery.consider(runtime, add_judgment(runtime, score=0))
        assert [row.status for row in alerts(runtime)] == ["posted", "held"]
        raised = post_never_answered(runtime, fake, fault)
        with pytest.raises(raised):
            summaries.flush_summaries(runtime)
        assert len(fake.posted(ALERTS)) == 2  # the alert and the summary
        summaries.flush_summaries(runtime)  # the task's retry
        summaries.flush_summaries(runtime)
        posts = fake.posted(ALERTS)
        assert len(posts) == 2 and len(fake.messages[ALERTS]) == 2
        summary = next(row for row in alerts(runtime) if row.kind == "summary")
        assert metadata_of(posts[1]) == {
            "event_type": "relmon_alert",
            "event_payload": {"dedupe_key": summary.dedupe_key},
        }
        assert summary.status == "posted" and summary.message_ts in fake.messages[ALERTS]


def test_an_unanswered_post_is_retried_later_than_other_failures(monkeypatch):
    """Slack may still be working on a post that timed out: its retry comes after the history has caught up.
    A request that could not even be sent (urllib's URLError) retries as soon as any other failure."""
    monkeypatch.setattr(tasks, "get_runtime", lambda: None)

    class Request:
        retries = 0

    class Task:
        name, request, countdowns = "test", Request(), []

        def retry(self, countdown, exc):
            self.countdowns.append(countdown)
            raise RuntimeError("retry")

    task = Task()
    for error in (TimeoutError("timed out"), RemoteDisconnected("closed"), URLError(ConnectionRefusedError())):

        def fail(runtime, error=error):
            raise error

        with pytest.raises(RuntimeError):
            tasks._run(task, fail)
    assert task.countdowns[:2] == [tasks.UNKNOWN_OUTCOME_RETRY_SECONDS] * 2
    assert tasks.RETRY_BASE_SECONDS <= task.countdowns[2] <= tasks.RETRY_BASE_SECONDS * 1.25  # the first backoff


# The time window, per-channel rules, the alert channel's cap, the log line ---------------------------------------


def set_answered_at(runtime, judgment_id: int, at: datetime) -> None:
    """When the answer was captured (the time window reads the pair's capture time)."""
    with runtime.db.session() as session:
        pair = session.get(Pair, session.get(Judgment, judgment_id).pair_id)
        pair.created_at = at


def degradation_posts(fake, channel: str = ALERTS) -> list[dict]:
    return [p for p in fake.posted(channel) if "getting worse" in p["text"]]


def test_a_bad_last_hour_alerts_before_the_count_window_fills(make_runtime, fake):
    """Window 20, floor 2.5, the hour's window with its minimum of 5: the fifth bad answer of the hour alerts,
    though the channel has far fewer than 20 answers, and the alert says which window tripped."""
    with make_runtime(degradation_window=20, degradation_floor=2.5, threshold=0) as runtime:
        for _ in range(4):
            delivery.consider(runtime, add_judgment(runtime, score=1))
        assert degradation_posts(fake) == []  # 4 answers: below the hour's minimum sample
        assert delivery.consider(runtime, add_judgment(runtime, score=1)).degradation == "below_floor"
        [post] = degradation_posts(fake)
        text = json.dumps(post["blocks"], ensure_ascii=False)
        assert "the 5 answers judged in the last 60 minutes is *1.00*" in text
        assert "window: last 20 answers or last 60 minutes (5 answers at least)" in text and "RELMON_" not in text
        [row] = [a for a in alerts(runtime) if a.kind == "degradation"]
        assert row.details["window"] == "minutes" and row.details["count"] == 5


@pytest.mark.parametrize("minutes", [60, 0])
def test_a_quiet_channel_whose_last_answers_reach_back_days(make_runtime, fake, minutes):
    """15 good answers over five days, then 5 bad ones in the last hour: the last-20 mean (3.25) stays above the
    floor; the last hour's (1.0) does not. With the time window off, no alert."""
    now = datetime.now(UTC)
    with make_runtime(degradation_window=20, degradation_floor=2.5, threshold=0, degradation_window_minutes=minutes
                      ) as runtime:  # fmt: skip
        for i in range(15):
            judgment_id = add_judgment(runtime, score=4)
            set_answered_at(runtime, judgment_id, now - timedelta(hours=8 * (15 - i)))
            delivery.consider(runtime, judgment_id, now=now)
        for _ in range(5):
            delivery.consider(runtime, add_judgment(runtime, score=1), now=now)
        # the last 20: 15 × 4 and 5 × 1 → 3.25, healthy; the last hour: 1.0
        assert len(degradation_posts(fake)) == (1 if minutes else 0)


STRICT = "C_STRICT"


@pytest.fixture
def strict_rule(make_runtime, fake, tmp_path):
    """C_STRICT's rule: a cap of 1 alert an hour, a floor of 3.5 over its last 3 answers (no time window); the same
    three answers judged 3 in it and in the support channel (on the defaults)."""
    fake.add_channel(STRICT, "strict", members=["U_RELMON"])
    rules = write_rules(
        tmp_path,
        {
            "channels": {
                STRICT: {
                    "alert_cap_per_hour": 1,
                    "degradation_floor": 3.5,
                    "degradation_window": 3,
                    "degradation_window_minutes": 0,
                }
            }
        },
    )
    with make_runtime(channel_rules_file=rules, degradation_window_minutes=0) as runtime:
        for channel in (STRICT, SUPPORT):
            judged(runtime, 3, 3, channel_id=channel)
        yield runtime


def test_rules_file_sets_the_degradation_window_with_its_floor_per_channel(strict_rule, fake):
    # mean 3.0: below the strict channel's floor of 3.5 over its window of 3; the defaults (20, 2.5) say nothing
    [post] = degradation_posts(fake)
    assert f"<#{STRICT}>" in post["text"] and "< 3.5" in post["text"]
    assert "last 3 judged answers" in json.dumps(post["blocks"])


def test_rules_file_sets_the_alert_cap_per_channel(strict_rule, fake):
    runtime = strict_rule
    for channel in (STRICT, SUPPORT):
        judged(runtime, 0, 2, channel_id=channel)
    lows = [p for p in fake.posted(ALERTS) if p["text"].startswith("Low relevancy")]
    assert sorted(p["text"].split(" in ")[1] for p in lows) == [f"<#{STRICT}>", f"<#{SUPPORT}>", f"<#{SUPPORT}>"]
    assert [(a.source_channel_id, a.status) for a in alerts(runtime) if a.status == "held"] == [(STRICT, "held")]
    assert summaries.flush_summaries(runtime) == 1
    [summary] = [p for p in fake.posted(ALERTS) if "more low score" in p["text"]]
    assert f"<#{STRICT}> reached its cap of 1 alerts" in json.dumps(summary["blocks"])


SOURCES = [f"C_SOURCE{i}" for i in range(6)]


def test_the_alert_channel_cap_holds_a_burst_across_source_channels(make_runtime, fake, tmp_path):
    """Six source channels, one low score each, one shared alert channel with a cap of 3 an hour: each source
    channel is far under its own cap, yet the alert channel receives 3 alerts and the rest go to summaries."""
    for channel in SOURCES:
        fake.add_channel(channel, channel.lower(), members=["U_RELMON"])
    rules = write_rules(tmp_path, {"channels": {"C_ELSEWHERE": {"alert_channel": "C_OTHER_ALERTS"}}})
    with make_runtime(alert_cap_per_hour=10, alert_channel_cap_per_hour=3, channel_rules_file=rules) as runtime:
        ids = [add_judgment(runtime, score=0, channel_id=channel) for channel in SOURCES]
        burst(lambda judgment_id: delivery.consider(runtime, judgment_id), ids, together=True)
        assert len(fake.posted(ALERTS)) == 3
        rows = alerts(runtime)
        assert sorted(a.status for a in rows) == ["held"] * 3 + ["posted"] * 3
        assert {a.details["reason"] for a in rows if a.status == "held"} == {"alert_channel_cap"}

        # One summary for the alert channel's hour, whatever the source channels: a burst across channels must
        # not become one summary message per channel.
        assert summaries.flush_summaries(runtime) == 1
        [summary] = [p for p in fake.posted(ALERTS) if "more low score" in p["text"]]
        assert summary["text"] == "3 more low scores from 3 channels this hour"
        blocks = json.dumps(summary["blocks"], ensure_ascii=False)
        assert "this channel's 3 from all channels" in blocks
        held_sources = sorted(a.source_channel_id for a in rows if a.status == "held")
        assert all(f"<#{channel}> (1 held, cap 10)" in blocks for channel in held_sources)
        assert all(f"• <#{channel}> · *0 / 4*" in blocks for channel in held_sources)  # each line says where
        # the cap is the alert channel's: a channel whose rule sends its alerts elsewhere still alerts
        delivery.consider(runtime, add_judgment(runtime, score=0, channel_id="C_ELSEWHERE"))
        assert len(fake.posted("C_OTHER_ALERTS")) == 1 and len(fake.posted(ALERTS)) == 4


# A bot that breaks everywhere at once: four channels getting worse, an alert channel capped at 2 an hour.
FOUR_WORSE = {
    "alert_channel_cap_per_hour": 2,
    "degradation_window": 2,
    "degradation_floor": 2.5,
    "degradation_window_minutes": 0,
    "threshold": 0,
}


def four_channels_get_worse(runtime, fake) -> list[Alert]:
    """Two answers judged 1 in each of four channels (threshold 0: not low-score alerts, only a falling mean); the
    degradation alerts."""
    for channel in SOURCES[:4]:
        fake.add_channel(channel, channel.lower(), members=["U_RELMON"])
    for channel in SOURCES[:4]:
        judged(runtime, 1, 2, channel_id=channel)
    return [a for a in alerts(runtime) if a.kind == "degradation"]


def test_degradation_alerts_share_the_alert_channel_cap(make_runtime, fake):
    """Two degradation alerts are posted, the other two held; a low score after that is held too: the cap counts
    both kinds."""
    with make_runtime(**FOUR_WORSE) as runtime:
        rows = four_channels_get_worse(runtime, fake)
        assert len(degradation_posts(fake)) == 2
        assert sorted(a.status for a in rows) == ["held", "held", "posted", "posted"]
        assert all(a.details["reason"] == "alert_channel_cap" for a in rows if a.status == "held")

    with make_runtime(**{**FOUR_WORSE, "threshold": 2}) as runtime:
        delivery.consider(runtime, add_judgment(runtime, score=0, channel_id=SOURCES[0]))
        [low] = [a for a in alerts(runtime) if a.kind == "low_score"]
        assert low.status == "held" and low.details["reason"] == "alert_channel_cap"  # 2 degradation alerts came first


def test_held_degradation_alerts_wait_at_the_top_of_the_summary(make_runtime, fake):
    """The two held wait in one summary, first news at its top."""
    with make_runtime(**FOUR_WORSE) as runtime:
        held = sorted(a.source_channel_id for a in four_channels_get_worse(runtime, fake) if a.status == "held")
        assert summaries.flush_summaries(runtime) == 1
        [summary] = [p for p in fake.posted(ALERTS) if "this hour" in p["text"]]
        assert summary["text"] == "2 channels getting worse this hour"
        blocks = json.dumps(summary["blocks"], ensure_ascii=False)
        assert "*Getting worse* (this channel had its 2 alerts for the hour)" in blocks
        assert all(
            f"• <#{channel}>: mean relevancy *1.00* over the last 2 judged answers" in blocks for channel in held
        )


def test_held_degradation_alerts_stay_episodes_while_their_channels_stay_bad(make_runtime, fake):
    """Held or posted, a channel getting worse is one episode: no repeat while it stays bad."""
    with make_runtime(**FOUR_WORSE) as runtime:
        four_channels_get_worse(runtime, fake)
        summaries.flush_summaries(runtime)  # the held ones summarised
        for channel in SOURCES[:4]:  # still bad: no channel alerts again, held or not
            delivery.consider(runtime, add_judgment(runtime, score=1, channel_id=channel))
        assert len([a for a in alerts(runtime) if a.kind == "degradation"]) == 4


def test_an_archived_alert_channel_does_not_hold_back_other_alert_channels_summaries(make_runtime, fake, tmp_path):
    """Summaries go out per alert channel: one that Slack refuses for good (archived) is marked failed, once, and
    the other alert channels' summaries are posted all the same, in the same flush."""
    fake.add_channel("C_OTHER", "other", members=["U_RELMON"])
    fake.archive_channel("C_AAA_GONE")  # sorts first: its summary is flushed before C_ALERTS's
    rules = write_rules(tmp_path, {"channels": {"C_OTHER": {"alert_channel": "C_AAA_GONE"}}})
    with make_runtime(alert_cap_per_hour=1, degradation_window_minutes=0, channel_rules_file=rules) as runtime:
        for channel in ("C_OTHER", SUPPORT):
            for _ in range(3):
                delivery.consider(runtime, add_judgment(runtime, score=0, channel_id=channel))
        assert summaries.flush_summaries(runtime) == 2
        [summary] = [p for p in fake.posted(ALERTS) if "more low score" in p["text"]]
        assert summary["text"] == f"2 more low scores in <#{SUPPORT}> this hour"
        states = {a.alert_channel_id: a.status for a in alerts(runtime) if a.kind == "summary"}
        assert states == {"C_AAA_GONE": "failed", ALERTS: "posted"}
        refused = len(fake.calls_to("chat.postMessage"))
        summaries.flush_summaries(runtime)  # a failed summary is not tried again
        assert len(fake.calls_to("chat.postMessage")) == refused


def test_the_alert_posted_log_line_names_the_alert_by_identifiers_only(make_runtime, fake, caplog):
    with make_runtime() as runtime:
        judgment_id = add_judgment(
            runtime, score=0, answer_ts="1764252300.000100", question="secret question", answer="secret answer"
        )
        with caplog.at_level(logging.INFO, logger="relmon.alerts"):
            delivery.consider(runtime, judgment_id)
        [record] = [r for r in caplog.records if r.getMessage() == "alert posted"]
        assert record.judgment_id == judgment_id and record.message_ts == "1764252300.000100"
        assert record.channel == SUPPORT and record.alert_channel == ALERTS
        assert record.alert_ts in fake.messages[ALERTS] and record.alert_kind == "low_score"
        assert "secret" not in json.dumps(vars(record), default=str)  # identifiers only, never text


def test_a_lease_left_by_an_earlier_attempt_of_the_same_task_is_taken_back_at_once(make_runtime, monkeypatch):
    # Redis went down while an attempt held the lease (it could not release it) and came back with the lock in its
    # append-only file: the retry of that same task (same Celery task id) must not wait out LEASE_SECONDS.
    monkeypatch.setattr(delivery, "LEASE_WAIT_SECONDS", 0.3)
    with make_runtime() as runtime:
        left_behind = runtime.redis.lock("relmon:alert-lease:77", timeout=delivery.LEASE_SECONDS)
        assert left_behind.acquire(token="task-1")
        with delivery.lease(runtime, 77, owner="task-1"):  # entered at all: a busy lease raises LeaseBusy after 0.3 s
            assert runtime.redis.pttl("relmon:alert-lease:77") > (delivery.LEASE_SECONDS - 5) * 1000
        assert runtime.redis.get("relmon:alert-lease:77") is None  # released on the way out
        # Another task's lease is still respected: it waits, then gives up for a later retry.
        assert left_behind.acquire(token="task-1")
        with pytest.raises(delivery.LeaseBusy), delivery.lease(runtime, 77, owner="task-2"):
            pass
        with pytest.raises(delivery.LeaseBusy), delivery.lease(runtime, 77):  # outside a task: no owner, no take-over
            pass


def test_the_migration_gives_old_per_source_summaries_the_per_alert_channel_key(db_url, make_runtime, fake):
    """Summaries posted under summary:<source>:<hour> (one per source channel) before migration 0005: the newest
    posted one of each alert channel-hour takes summary:<alert channel>:<hour>, so the hour's summary updates
    that message instead of posting a second that repeats its scores. A key already taken is left alone."""
    from alembic import command

    from store.db import Database, alembic_config

    hour = hour_start(datetime.now(UTC))
    label = hour_label(hour)
    config = alembic_config(db_url)
    command.downgrade(config, "0004")
    database = Database(db_url)
    try:
        old = fake._api_chat_postMessage({"channel": ALERTS, "text": f"2 more low scores in <#{SUPPORT}> this hour"})
        with database.session() as session:
            for dedupe_key, source, alert_channel, ts in [
                (f"summary:C_OTHER:{label}", "C_OTHER", ALERTS, "1.000001"),  # older: stays as it is
                (f"summary:{SUPPORT}:{label}", SUPPORT, ALERTS, old["ts"]),
                (f"summary:{SUPPORT}:2020010100", SUPPORT, "C_ELSEWHERE", "1.000002"),
                ("summary:C_ELSEWHERE:2020010100", None, "C_ELSEWHERE", "1.000003"),  # the new key exists already
            ]:
                row, _ = alert_store.claim(
                    session,
                    dedupe_key=dedupe_key,
                    kind="summary",
                    source_channel_id=source,
                    alert_channel_id=alert_channel,
                    details={"hour": hour.isoformat(), "count": 2},
                )
                alert_store.mark_posted(session, row.id, ts)
    finally:
        database.dispose()
    command.upgrade(config, "head")
    with make_runtime(alert_cap_per_hour=1, degradation_window_minutes=0) as runtime:
        with runtime.db.session() as session:
            keys = {(a.dedupe_key, a.source_channel_id, a.message_ts) for a in session.execute(select(Alert)).scalars()}
        assert keys == {
            (f"summary:C_OTHER:{label}", "C_OTHER", "1.000001"),
            (f"summary:{ALERTS}:{label}", None, old["ts"]),
            (f"summary:{SUPPORT}:2020010100", SUPPORT, "1.000002"),
            ("summary:C_ELSEWHERE:2020010100", None, "1.000003"),
        }
        for i in range(4):
            delivery.consider(runtime, add_judgment(runtime, score=0, reasoning=f"reason {i}"))
        posts = len(fake.posted(ALERTS))
        summaries.flush_summaries(runtime)
        assert len(fake.posted(ALERTS)) == posts  # no second summary
        [update] = fake.calls_to("chat.update")
        assert update["ts"] == old["ts"] and "3 more low scores this hour" in json.dumps(update["blocks"])


def test_a_redrawn_alert_quotes_by_the_channel_it_lives_in_not_todays_rule(make_runtime, fake, tmp_path):
    """A private channel's alert posted where its rule sent it (withheld there: no quoting); then the rule
    changes to quote it in another alert channel. A vote redraws the old alert in the channel it lives in: still
    withheld (before, a redraw asked today's rule, which quotes private text wherever the channel's alerts go)."""
    rules = write_rules(tmp_path, {"channels": {"G_PRIVATE": {"alert_channel": "C_A"}}})
    with make_runtime(channel_rules_file=rules) as runtime:
        judgment_id = add_judgment(runtime, score=0, private=True, channel_id="G_PRIVATE", question="secret question")
        delivery.consider(runtime, judgment_id)
        [row] = alerts(runtime)
        assert row.alert_channel_id == "C_A" and "secret question" not in json.dumps(fake.posted("C_A")[0]["blocks"])
    write_rules(tmp_path, {"channels": {"G_PRIVATE": {"alert_channel": "C_B", "quote_private": True}}})
    with make_runtime(channel_rules_file=rules) as runtime:
        with runtime.db.session() as session:
            record_vote(session, judgment_id, "U1", "right")
        assert delivery.refresh_votes(runtime, row.id) == "updated"
        [update] = fake.calls_to("chat.update")
        assert update["channel"] == "C_A" and "1 says the judge was right" in json.dumps(update["blocks"])
        assert "secret question" not in json.dumps(update["blocks"])


def test_redraws_of_one_alert_are_coalesced(make_runtime, fake):
    """Twenty asks to redraw one alert within the window (votes changing meanwhile): one chat.update at once, one
    trailing redraw scheduled for the window's end, the rest cost nothing; the trailing one shows the final tally."""
    with make_runtime(alert_redraw_seconds=10.0) as runtime:
        judgment_id = add_judgment(runtime, score=0)
        delivery.consider(runtime, judgment_id)
        [row] = alerts(runtime)
        outcomes = []
        for n in range(20):
            with runtime.db.session() as session:
                record_vote(session, judgment_id, f"U{n}", "wrong")
            outcomes.append(delivery.refresh_votes(runtime, row.id))
        assert outcomes == ["updated", "deferred"] + ["coalesced"] * 18
        assert len(fake.calls_to("chat.update")) == 1
        assert delivery.refresh_votes(runtime, row.id, trailing=True) == "deferred"  # early: waits for the window
        # The behaviour under test: the window's end (its gate's expiry) lets the scheduled redraw through.
        time.sleep(runtime.redis.pttl(redraws.gate_key(row.id)) / 1000 + 0.05)
        assert delivery.refresh_votes(runtime, row.id, trailing=True) == "updated"  # the one scheduled
        assert len(fake.calls_to("chat.update")) == 2
        assert "20 say it was wrong" in json.dumps(fake.calls_to("chat.update")[-1]["blocks"], ensure_ascii=False)
