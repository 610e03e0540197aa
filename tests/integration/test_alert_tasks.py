"""The Slack tasks run in-process against FakeSlack (real HTTP), real Redis and SQLite/PostgreSQL: at most one
alert per judgment (retries, twins, a worker that died after claiming, a post Slack took without answering), the
lease, and the log line. Caps and summaries: test_alert_summaries.py; degradation: test_alert_degradation.py;
privacy, votes and verdicts: test_alert_votes_verdicts.py (`make_runtime`: tests/integration/conftest.py)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from http.client import RemoteDisconnected
from urllib.error import URLError

import pytest
from sqlalchemy import select
from sqlalchemy.exc import OperationalError

from common.messages.forgotten import forgotten_note
from store import alerts as alert_store
from store import forgetting
from store.alert_reads import AlertRow
from store.forget_plan import ForgetPlan
from store.models import Alert
from tests import alert_helpers
from tests.alert_helpers import ALERTS, SUPPORT, add_judgment, alerts
from tests.bursts import burst
from tests.sql_capture import statements_run
from workers.alerts import delivery, planning, summaries
from workers.tasks import slack as tasks

one_hour = alert_helpers.one_hour  # autouse (tests/alert_helpers.py): the caps these tests fill count per UTC hour


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


def test_the_alert_task_reads_its_pair_once_and_counts_the_hour_once(make_runtime, fake):
    """One judgment's alert path, from `load` to the post: the pair (texts and all) is read once, with the
    judgment, and the message is drawn from that read; the caps' counts are one statement."""
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=1)
        with statements_run(runtime.db.engine) as statements:
            assert delivery.consider(runtime, judgment_id).low == "posted"
        assert len([s for s in statements if "pairs.question_text" in s]) == 1
        assert len([s for s in statements if s.lstrip().upper().startswith("SELECT") and "count(alerts.id)" in s]) == 1
        assert "How do I reset my password?" in json.dumps(fake.posted(ALERTS)[0]["blocks"])


def test_an_alert_shows_no_words_deleted_after_its_task_loaded_them(make_runtime, fake):
    """A deletion while the task waits (for the second opinion, say) scrubs the pair and the reasoning: the alert
    posted after it is drawn from what the database holds then, not from what the task loaded or claimed, and says
    that words were deleted."""
    with make_runtime() as runtime:
        judgment_id = add_judgment(runtime, score=1, question="My card 4111 1111 is refused", reasoning="Card 4111.")
        judged = planning.load(runtime, judgment_id)
        with runtime.db.session() as session:
            row, _ = alert_store.claim_alert(
                session,
                dedupe_key=f"low:{judgment_id}",
                kind=alert_store.KIND_LOW,
                judgment_id=judgment_id,
                source_channel_id=SUPPORT,
                alert_channel_id=ALERTS,
            )
            claimed = AlertRow.of(row)
        with runtime.db.session() as session:  # what the forget task writes (workers.tasks.forgetting)
            plan = ForgetPlan(
                pairs={judged.pair.id: {"question_text": None}},
                judgments={judgment_id: {"reasoning": "[deleted]"}},
                about={judged.pair.id: "question"},
            )
            forgetting.apply_plan(session, plan)
            forgetting.note_on_alerts(session, plan.about)
        assert delivery.post_alert(runtime, claimed, judged) == "posted"
        [posted] = fake.posted(ALERTS)
        assert "4111" not in json.dumps(posted) and "Our office is open 9 to 5." in json.dumps(posted["blocks"])
        assert forgotten_note("question") in json.dumps(posted["blocks"])


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
            alert_store.claim_alert(
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
    real_mark_alert_posted = alert_store.mark_alert_posted
    failures = []

    def database_gone_once(session, alert_id, message_ts):
        if not failures:
            failures.append(alert_id)
            raise OperationalError("UPDATE alerts", {}, Exception("server closed the connection unexpectedly"))
        return real_mark_alert_posted(session, alert_id, message_ts)

    monkeypatch.setattr(alert_store, "mark_alert_posted", database_gone_once)
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
