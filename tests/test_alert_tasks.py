"""The Slack tasks run in-process against FakeSlack (real HTTP), real Redis and SQLite/PostgreSQL:
at most one alert per judgment (retries, twins, a worker that died after claiming), the hourly cap and
its summary, degradation, privacy, 429s, vote tallies and private verdicts."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from store import alerts as alert_store
from store.feedback import record_vote
from store.models import Alert, Pair
from tests.alert_helpers import ALERTS, SUPPORT, add_judgment, alert_runtime, fake_slack, make_settings, write_rules
from workers.tasks import slack as tasks


@pytest.fixture
def fake():
    with fake_slack() as server:
        yield server


@pytest.fixture
def make_runtime(db_url, redis_url, fake):
    def build(**overrides):
        settings = make_settings(redis_url=redis_url, database_url=db_url, slack_api_url=fake.api_url, **overrides)
        return alert_runtime(settings)

    return build


def alerts(runtime) -> list[Alert]:
    with runtime.db.session() as session:
        return list(session.execute(select(Alert).order_by(Alert.id)).scalars())


def test_low_score_posts_exactly_one_alert_even_when_repeated(make_runtime, fake):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=1)
        assert tasks.consider(runtime, judgment_id).startswith("posted")
        assert tasks.consider(runtime, judgment_id).startswith("posted")  # a retry or redelivery
        tasks.consider_alert(judgment_id)  # the Celery task body, as a worker runs it
        posts = fake.posted(ALERTS)
        assert len(posts) == 1
        blocks = json.loads(posts[0]["blocks"]) if isinstance(posts[0]["blocks"], str) else posts[0]["blocks"]
        assert blocks[0]["text"]["text"] == "Low relevancy score: 1 / 4"
        text = json.dumps(blocks)
        assert "How do I reset my password?" in text and "opening hours" in text and f"<#{SUPPORT}>" in text
        actions = next(b for b in blocks if b["type"] == "actions")["elements"]
        assert [a["action_id"] for a in actions] == ["open_message", "feedback_right", "feedback_wrong"]
        assert actions[0]["url"].startswith(f"https://example.slack.com/archives/{SUPPORT}/p")
        assert actions[1]["value"] == str(judgment_id)
        [row] = alerts(runtime)
        assert (row.kind, row.status, row.dedupe_key) == ("low_score", "posted", f"low:{judgment_id}")
        assert row.message_ts in fake.messages[ALERTS]  # kept for chat.update


@pytest.mark.parametrize(
    ("score", "status", "judge"),
    [(3, "ok", "relevancy"), (4, "ok", "relevancy"), (None, "error", "relevancy"), (None, "null", "grounded")],
)
def test_no_alert_for_good_scores_errors_and_nulls(make_runtime, fake, score, status, judge):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=score, status=status, judge=judge)
        tasks.consider(runtime, judgment_id)
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
        tasks.consider(runtime, judgment_id)
        tasks.consider(runtime, judgment_id)
        assert len(fake.posted(ALERTS)) == 1
        assert alerts(runtime)[0].status == "posted"


def test_twin_workers_on_one_judgment_post_once(make_runtime, fake):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0)
        fake.rate_limit("chat.postMessage", times=1, retry_after=1)  # the first poster is slow: the twin must wait
        errors = []

        def run():
            try:
                tasks.consider(runtime, judgment_id)
            except Exception as error:  # pragma: no cover - shown by the assertion
                errors.append(error)

        threads = [threading.Thread(target=run) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        # the 429 was waited out (Retry-After) and retried: two calls, one message in the channel
        assert len(fake.calls_to("chat.postMessage")) == 2
        assert len(fake.messages[ALERTS]) == 1


def test_hourly_cap_gathers_the_rest_into_one_summary(make_runtime, fake):
    with make_runtime(alert_cap_per_hour=2) as runtime:
        ids = [add_judgment(runtime, score=0, reasoning=f"reason {i}") for i in range(5)]
        for judgment_id in ids:
            tasks.consider(runtime, judgment_id)
        assert len(fake.posted(ALERTS)) == 2
        statuses = [row.status for row in alerts(runtime)]
        assert statuses == ["posted", "posted", "held", "held", "held"]

        assert tasks.flush_summaries(runtime) == 1
        tasks.flush_summaries(runtime)  # nothing new: no second post, no update
        posts = fake.posted(ALERTS)
        assert len(posts) == 3 and fake.calls_to("chat.update") == []
        summary = json.dumps(posts[2]["blocks"])
        assert "3 more low scores this hour" in summary and "reason 4" in summary and "cap of 2" in summary

        more = add_judgment(runtime, score=1, reasoning="reason 5")
        tasks.consider(runtime, more)
        tasks.flush_summaries(runtime)
        assert len(fake.posted(ALERTS)) == 3  # still one summary message…
        [update] = fake.calls_to("chat.update")  # …updated in place
        assert "4 more low scores this hour" in json.dumps(update["blocks"])
        summary_rows = [row for row in alerts(runtime) if row.kind == "summary"]
        assert len(summary_rows) == 1 and summary_rows[0].dedupe_key.startswith(f"summary:{SUPPORT}:")


def test_cap_holds_under_a_concurrent_burst(make_runtime, fake):
    """Eight workers handle eight low scores at once: the cap of three still holds exactly."""
    with make_runtime(alert_cap_per_hour=3) as runtime:
        ids = [add_judgment(runtime, score=0) for _ in range(8)]
        barrier = threading.Barrier(len(ids))

        def run(judgment_id):
            barrier.wait(timeout=10)
            tasks.consider(runtime, judgment_id)

        threads = [threading.Thread(target=run, args=(i,)) for i in ids]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert len(fake.posted(ALERTS)) == 3
        assert sorted(row.status for row in alerts(runtime)) == ["held"] * 5 + ["posted"] * 3


def test_degradation_alerts_once_and_rearms_after_recovery(make_runtime, fake):
    with make_runtime(degradation_window=4, degradation_floor=2.5, threshold=0) as runtime:
        # threshold 0: these 1s are not low-score alerts, only a falling mean
        for _ in range(3):
            tasks.consider(runtime, add_judgment(runtime, score=1))
        assert fake.posted(ALERTS) == []  # fewer answers than the window
        tasks.consider(runtime, add_judgment(runtime, score=1))
        [post] = fake.posted(ALERTS)
        assert "getting worse" in post["text"] and "1.00" in json.dumps(post["blocks"])
        for _ in range(3):
            tasks.consider(runtime, add_judgment(runtime, score=1))
        assert len(fake.posted(ALERTS)) == 1  # still degraded: no repeat
        for _ in range(4):
            tasks.consider(runtime, add_judgment(runtime, score=4))
        [row] = [a for a in alerts(runtime) if a.kind == "degradation"]
        assert row.details.get("recovered_at")  # re-armed
        for _ in range(4):
            tasks.consider(runtime, add_judgment(runtime, score=1))
        assert len(fake.posted(ALERTS)) == 1  # re-armed, but not twice within the hour

        later = datetime.now(UTC) + timedelta(hours=2)
        tasks.consider(runtime, add_judgment(runtime, score=1, created_at=later), now=later)
        assert len(fake.posted(ALERTS)) == 2
        assert [a.dedupe_key for a in alerts(runtime) if a.kind == "degradation"] == [
            f"degr:{SUPPORT}:1",
            f"degr:{SUPPORT}:2",
        ]


def test_private_channel_alert_withholds_text(make_runtime, fake):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0, private=True, question="secret question", answer="secret answer")
        tasks.consider(runtime, judgment_id)
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
        tasks.consider(runtime, judgment_id)
        assert fake.posted(ALERTS) == []
        [post] = fake.posted("C_PRIVATE_ALERTS")
        assert "secret question" in json.dumps(post["blocks"])


def test_votes_update_the_posted_alert(make_runtime, fake):
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0)
        tasks.consider(runtime, judgment_id)
        [row] = alerts(runtime)
        with runtime.db.session() as session:
            record_vote(session, judgment_id, "U1", "right")
            record_vote(session, judgment_id, "U2", "wrong")
            record_vote(session, judgment_id, "U1", "wrong")  # changed
        assert tasks.refresh_votes(runtime, row.id) == "updated"
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
        assert tasks.deliver(runtime, pair_id) == "response_url"
        assert tasks.deliver(runtime, pair_id) == "posted"
        [response] = fake.responses["verdict"]
        assert response["response_type"] == "ephemeral"
        assert response["blocks"][0]["text"]["text"] == "Verdict: Relevancy 0 / 4"
        assert fake.posted() == []  # nothing in any channel


def test_verdict_falls_back_to_a_direct_message(make_runtime, fake):
    with make_runtime() as runtime:
        with runtime.db.session() as session:
            pair = Pair(source="shortcut", channel_id=SUPPORT, question_text="q", answer_text="a", status="judged",
                        requested_by="U_ASKER", response_url=None)  # fmt: skip
            session.add(pair)
            session.flush()
            pair_id = pair.id
        add_judgment_for_pair(runtime, pair_id, score=3)
        assert tasks.deliver(runtime, pair_id) == "direct_message"
        [post] = fake.posted("U_ASKER")
        assert "Relevancy 3 / 4" in post["text"]


def add_judgment_for_pair(runtime, pair_id: int, score: float) -> None:
    from store.models import Judgment

    with runtime.db.session() as session:
        session.add(Judgment(pair_id=pair_id, judge="relevancy", status="ok", score=score, max_score=4, reasoning="r"))


def _alert_state(runtime) -> list[tuple]:
    return [(a.dedupe_key, a.status, json.dumps(a.details, sort_keys=True)) for a in alerts(runtime)]


def test_the_lock_free_precheck_never_skips_a_judgment_that_changes_anything(make_runtime, fake):
    """Judging enqueues consider_alert only when `follow_up_needed` says an alert may follow. Along a run of
    scores that alerts, holds, degrades, recovers and degrades again, every judgment whose `consider` changed
    the alerts table was flagged, and plain good scores were not."""
    from workers.alerts.policy import JudgmentFacts

    scores = [4, 4, 1, 4, 1, 1, 1, 1, 1, 4, 4, 4, 4, 4, 4, 1, 1, 1, 1, 4, 4]
    with make_runtime(degradation_window=4, degradation_floor=2.5, threshold=1, alert_cap_per_hour=2) as runtime:
        flagged_good = 0
        for score in scores:
            judgment_id = add_judgment(runtime, score=score)
            facts = JudgmentFacts(judgment_id, "relevancy", "ok", score, "capture", SUPPORT)
            needed = tasks.follow_up_needed(runtime, facts)
            before = _alert_state(runtime)
            tasks.consider(runtime, judgment_id)
            if _alert_state(runtime) != before:
                assert needed, f"score {score} (judgment {judgment_id}) changed alerts but was not flagged"
            elif needed and score == 4:
                flagged_good += 1
        assert fake.posted(ALERTS)  # the run did alert
        assert flagged_good < scores.count(4)  # good scores in a healthy window are not flagged
        assert not tasks.follow_up_needed(runtime, JudgmentFacts(0, "relevancy", "error", None, "capture", SUPPORT))


def test_a_stale_claim_whose_post_reached_slack_is_not_posted_again(make_runtime, fake):
    """A worker posted the alert, then died before recording it: the retry finds the message by the dedupe key
    in its metadata and records it instead of posting a second one."""
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=0)
        assert tasks.consider(runtime, judgment_id).startswith("posted")
        [posted] = fake.posted(ALERTS)
        metadata = json.loads(posted["metadata"]) if isinstance(posted["metadata"], str) else posted["metadata"]
        assert metadata["event_payload"]["dedupe_key"] == f"low:{judgment_id}"
        [posted_ts] = fake.messages[ALERTS]
        with runtime.db.session() as session:  # as if the worker died before marking it posted, a while ago
            row = session.execute(select(Alert)).scalar_one()
            row.status, row.message_ts = "claimed", None
            row.created_at = datetime.now(UTC) - timedelta(minutes=5)
        runtime.redis.delete(f"relmon:posted:low:{judgment_id}")  # it died before even the Redis receipt
        assert tasks.consider(runtime, judgment_id).startswith("posted")
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
            tasks.consider(runtime, judgment_id)
        assert len(fake.posted(ALERTS)) == 1
        [row] = alerts(runtime)
        assert row.status == "claimed"  # the database never heard of the post
        assert tasks.consider(runtime, judgment_id).startswith("posted")  # the retry
        assert len(fake.posted(ALERTS)) == 1
        [row] = alerts(runtime)
        [posted_ts] = fake.messages[ALERTS]
        assert (row.status, row.message_ts) == ("posted", posted_ts)
