"""Follow-up tasks only their message carries (workers.noted_tasks): an alert's decision whose message a dying
worker lost in kombu's window is sent again by the orphan check once its lease is over, and posts its alert once;
a task that ended drops its note, one that is retrying keeps it. Real Redis, real FakeSlack, SQLite/PostgreSQL."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from celery.exceptions import Retry

from common import celery_app, task_names
from common.celery_app import QUEUE_SLACK
from tests.alert_helpers import ALERTS, add_judgment
from workers import noted_tasks
from workers.judging.queued import queued_notes
from workers.sweeps import requeue_lost_follow_ups
from workers.tasks import slack as tasks

CONSIDER = task_names.CONSIDER_ALERT


def notes(runtime) -> set[str]:
    return {raw.decode() for raw in runtime.redis.zrange(noted_tasks.KEY, 0, -1)}


def test_a_lost_alert_decision_is_sent_again_once_its_lease_is_over(runtime, fake, monkeypatch) -> None:
    lost, waiting = add_judgment(runtime, score=1), add_judgment(runtime, score=1)
    two_minutes_ago = time.time() - 120
    runtime.redis.zadd(noted_tasks.KEY, {noted_tasks.note_of(CONSIDER, [lost]): two_minutes_ago})  # no message
    noted_tasks.send(runtime.redis, CONSIDER, [waiting], two_minutes_ago)  # a real message, still on the queue
    assert queued_notes(runtime.redis, QUEUE_SLACK) == {noted_tasks.note_of(CONSIDER, [waiting])}

    sent: list[tuple[str, list]] = []
    monkeypatch.setattr(celery_app.celery, "send_task", lambda name, args=None, **_: sent.append((name, args)))
    assert requeue_lost_follow_ups(runtime, time.time() - 119, lease_seconds=30) == 0  # within its lease: waits
    assert requeue_lost_follow_ups(runtime, time.time(), lease_seconds=30) == 1
    assert sent == [(CONSIDER, [lost])]
    assert requeue_lost_follow_ups(runtime, time.time(), lease_seconds=30) == 0  # noted again, as just sent

    assert tasks.consider_alert.apply(args=[lost]).get().low == "posted"  # the resent message, run
    assert len(fake.posted(ALERTS)) == 1
    assert notes(runtime) == {noted_tasks.note_of(CONSIDER, [waiting])}


def test_a_task_that_ended_meanwhile_is_not_sent_again(runtime, monkeypatch) -> None:
    judgment = add_judgment(runtime, score=1)
    note = noted_tasks.note_of(CONSIDER, [judgment])
    runtime.redis.zadd(noted_tasks.KEY, {note: time.time() - 120})
    # The task ends (its message acknowledged, its note dropped) while the orphan check reads the messages.
    real_queued = queued_notes

    def reading_while_it_ends(client, *queues):
        found = real_queued(client, *queues)
        noted_tasks.done(client, CONSIDER, [judgment])
        return found

    monkeypatch.setattr("workers.sweeps.queued_notes", reading_while_it_ends)
    sent: list = []
    monkeypatch.setattr(celery_app.celery, "send_task", lambda *args, **kwargs: sent.append(args))
    assert requeue_lost_follow_ups(runtime, time.time(), lease_seconds=30) == 0
    assert sent == [] and notes(runtime) == set()


def _task(args: list, retries: int) -> SimpleNamespace:
    def retry(countdown: float, exc: BaseException) -> None:
        raise Retry(exc=exc, when=countdown)

    return SimpleNamespace(name=CONSIDER, request=SimpleNamespace(args=args, retries=retries), retry=retry)


def slack_down(_runtime, _judgment_id):
    raise ConnectionError("slack.com unreachable")


def test_a_retrying_task_keeps_its_note(runtime) -> None:
    noted_tasks.send(runtime.redis, CONSIDER, [7], time.time())
    runtime.redis.delete(QUEUE_SLACK)
    with pytest.raises(Retry):
        tasks._run_noted(_task([7], retries=0), slack_down, 7)
    assert notes(runtime) == {noted_tasks.note_of(CONSIDER, [7])}  # its retry is on the way


def test_a_task_out_of_retries_drops_its_note(runtime) -> None:
    noted_tasks.send(runtime.redis, CONSIDER, [7], time.time())
    runtime.redis.delete(QUEUE_SLACK)
    with pytest.raises(ConnectionError):
        tasks._run_noted(_task([7], retries=tasks.MAX_RETRIES), slack_down, 7)
    assert notes(runtime) == set()  # given up on: nothing will send it again


def test_a_task_that_ends_drops_its_note(runtime, fake) -> None:
    judgment = add_judgment(runtime, score=1)
    noted_tasks.send(runtime.redis, CONSIDER, [judgment], time.time())
    assert notes(runtime) == {noted_tasks.note_of(CONSIDER, [judgment])}
    assert tasks.consider_alert.apply(args=[judgment]).get().low == "posted"
    assert notes(runtime) == set() and len(fake.posted(ALERTS)) == 1


def test_old_notes_are_dropped_after_a_day(runtime) -> None:
    now = time.time()
    runtime.redis.zadd(noted_tasks.KEY, {noted_tasks.note_of(CONSIDER, [1]): now - 90_000, "not json": now - 60})
    assert noted_tasks.overdue(runtime.redis, noted_before=now, now=now, limit=10) == {}
    assert notes(runtime) == set()
