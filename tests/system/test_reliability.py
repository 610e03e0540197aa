"""Fault tests, end to end: signed events over real HTTP to the bot's WSGI app → real Redis → real `relmon worker`
processes → the fake LLM and the fake Slack over HTTP → PostgreSQL (SQLite when no server answers locally).

Each test sends question/answer pairs the way Slack does (a 5xx or a dropped connection is retried, as Slack
retries), breaks something mid-run — a worker killed with SIGKILL, a task message lost in a dying worker's hands,
the LLM failing 30% of calls, Slack answering 429 — then checks the pipeline's promises:
every captured pair is judged, or stored as an error, exactly once per judge; every low score is alerted exactly
once (counted at the fake Slack, per judgment); no error becomes an alert; the LLM saw no more calls than judgments
plus the calls cut short by the fault. Redis and PostgreSQL faults: tests/system/test_reliability_services.py.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
import redis

from common import task_names, task_notes
from store import alerts as alert_store
from store.models import JudgmentStatus
from tests import slack_requests as sr
from tests.alert_helpers import ALERTS, add_judgment
from tests.broker import wait_until_idle
from tests.processes import wait_for

pytestmark = pytest.mark.slow

# The recovery timings are the defaults (the task lease RELMON_VISIBILITY_TIMEOUT, the orphan check every half
# lease, RELMON_SWEEP_AFTER_SECONDS; see tests/running_system.py): a green run means the defaults recover.
RECOVERY_BOUND = 60.0  # a dead worker's answers are judged and alerted this long after a live worker is there


# The faults --------------------------------------------------------------------------------------------------


def test_worker_killed_mid_batch_end_to_end_with_alerts(make_system) -> None:
    """SIGKILL one of two workers while it holds LLM calls in flight; a replacement joins. The killed worker's
    unacked tasks come back once their lease lapses and are finished elsewhere, once."""
    system = make_system(llm_latency_ms=400, concurrency=8)
    victim = system.workers[0]
    system.send_answers(40)
    wait_for(lambda: len(system.judgments()) >= 5, timeout=60, what="judging under way")
    in_flight_before = len(system.llm.requests) - len(system.judgments())
    victim.kill()
    assert not victim.running()
    system.wait_until_finished()  # the supervisor starts a replacement
    assert system.restarts == 1
    tallies = system.check_exactly_once(extra_llm_calls=max(in_flight_before, 0) + 16)
    assert tallies["alerts"] == 10


def test_the_only_worker_killed_while_busy_recovers_within_a_minute_of_its_replacement(make_system) -> None:
    """Issue #19's trial: one worker at the default concurrency, the LLM at 800 ms, 40 answers; the worker is
    SIGKILLed while busy and a replacement starts. Within 60 s of the replacement being ready, every answer is
    judged and every off-topic one alerted, exactly once."""
    system = make_system(llm_latency_ms=800, workers=1, concurrency=64)
    system.send_answers(40)
    wait_for(lambda: len(system.llm.requests) >= 10, timeout=60, what="LLM calls in flight")
    in_flight_before = len(system.llm.requests) - len(system.judgments())
    system.workers[0].kill()
    system.revive_dead_workers()
    system.workers[0].wait_until_ready(timeout=90)
    ready_at = time.monotonic()
    system.wait_until_finished(timeout=RECOVERY_BOUND)
    recovered_in = time.monotonic() - ready_at
    tallies = system.check_exactly_once(extra_llm_calls=max(in_flight_before, 0) + 64)
    assert tallies["pairs"] == 40 and tallies["alerts"] == 10
    assert recovered_in <= RECOVERY_BOUND


def test_an_alert_task_lost_in_a_dying_workers_hands_is_sent_again_by_beat(make_system, redis_url) -> None:
    """A low score whose `consider_alert` message a SIGKILLed worker took off the queue but never recorded as held
    (kombu's window): its note is all that is left. Beat's orphan check sends it again once it is a lease old, and a
    live worker posts the alert, once."""
    system = make_system(workers=1)
    broker = redis.Redis.from_url(redis_url)
    runtime = SimpleNamespace(db=system.database)
    judgment_id = add_judgment(runtime, score=0, answer_ts=sr.next_ts(), answer="Our offtopic cafeteria serves pasta.")
    call = task_notes.Call(task_names.CONSIDER_ALERT, (judgment_id,))
    task_notes.note(broker, [call], time.time() - 60)
    # The orphan check runs every half lease (15 s at the default 30 s): the alert lands within one round or two.
    wait_for(lambda: system.slack.posted(ALERTS), timeout=45, interval=0.25, what="the alert, sent again")
    wait_for(lambda: broker.hlen(task_notes.KEY) == 0, timeout=10, what="its note dropped")
    wait_until_idle(redis_url)  # the task and what it sent ran: a second post would be there now
    [alert] = system.slack.posted(ALERTS)
    assert alert["text"].startswith("Low relevancy score 0")
    broker.close()


def test_llm_failing_thirty_percent_of_calls(make_system) -> None:
    """429s, 5xx, timeouts and garbage on 30% of calls: transient ones are retried (one layer: Celery), garbage
    is stored as an error verdict, never a guessed score and never an alert."""
    system = make_system(llm_latency_ms=20, RELMON_LLM_TIMEOUT=1)  # the served timeouts (1.5 s) outlast it
    system.llm.set_behavior(latency_ms=20, fault_rate=0.3, seed=8, timeout_seconds=1.5, retry_after_seconds=0.05)
    system.send_answers(40)
    system.wait_until_finished()
    statuses = system.llm.statuses
    assert statuses.get(429) and statuses.get(500), statuses
    retries = sum(count for status, count in statuses.items() if status != 200)
    tallies = system.check_exactly_once(extra_llm_calls=retries + 16)
    assert tallies["errors"] >= 1  # garbage replies became error verdicts
    errors = [j for j in system.judgments() if j.status == JudgmentStatus.ERROR]
    assert all(j.score is None for j in errors)


def test_slack_rate_limits_alert_posts(make_system) -> None:
    """chat.postMessage answers 429 with Retry-After: each alert waits and is posted once."""
    system = make_system(llm_latency_ms=20)
    system.slack.rate_limit("chat.postMessage", times=6, retry_after=1)
    system.send_answers(24)
    system.wait_until_finished()
    tallies = system.check_exactly_once()
    assert tallies["alerts"] == 6
    attempts = system.slack.calls_to("chat.postMessage")
    assert len(attempts) >= tallies["alerts"] + 6  # the refused attempts were made, and retried


def test_slack_drops_the_connection_after_taking_alert_posts(make_system) -> None:
    """Slack carries out chat.postMessage but the connection closes before its answer: the client does not re-send
    it (only a request that never left is retried), and the task's retry finds the marked post in the channel
    instead of posting it again. Each alert is posted once."""
    system = make_system(llm_latency_ms=20)
    system.slack.drop_method("chat.postMessage", times=4)
    system.send_answers(24)
    system.wait_until_finished()
    # The dropped posts are in the channel at once; their tasks record them only when a retry has found them.
    wait_for(
        lambda: all(a.status == alert_store.STATUS_POSTED for a in system.alert_rows()),
        timeout=60,
        what="every alert recorded as posted",
    )
    tallies = system.check_exactly_once()
    assert tallies["alerts"] == 6
    assert len(system.slack.calls_to("chat.postMessage")) == tallies["alerts"]  # the dropped ones were not re-sent
    assert system.slack.calls_to("conversations.history")  # the retries looked for them
