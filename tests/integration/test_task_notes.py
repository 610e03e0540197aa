"""The one record of work handed on (common.task_notes): an alert's decision whose message a dying worker lost in
kombu's window is sent again by the orphan check once its lease is over, and posts its alert
once; a task that ended drops its note (workers.task_ends), one that is retrying, requeued or stopped by an outage
keeps it. Real Redis, real FakeSlack, SQLite/PostgreSQL."""

from __future__ import annotations

import time

import pytest
import redis
from celery import states
from celery.exceptions import Retry

from common import celery_app, task_names, task_notes
from common.celery_app import QUEUE_SLACK
from tests.alert_helpers import ALERTS, add_judgment
from workers.judging.queued import queued_notes
from workers.sweeps import requeue_lost_tasks
from workers.task_ends import drop_the_note_of_an_ended_task
from workers.tasks import slack as tasks

CONSIDER = task_names.CONSIDER_ALERT


def notes(runtime) -> set[str]:
    return {raw.decode() for raw in runtime.redis.hkeys(task_notes.KEY)}


def consider(judgment_id: int) -> task_notes.Call:
    return task_notes.Call(CONSIDER, (judgment_id,))


def test_a_call_has_the_same_id_in_any_process() -> None:
    assert consider(7).id == task_notes.call_id(CONSIDER, [7]) != consider(8).id


def test_a_lost_alert_decision_is_sent_again_once_its_lease_is_over(runtime, fake, monkeypatch) -> None:
    lost, waiting = consider(add_judgment(runtime, score=1)), consider(add_judgment(runtime, score=1))
    two_minutes_ago = time.time() - 120
    task_notes.note(runtime.redis, [lost], two_minutes_ago)  # noted, its message never sent
    task_notes.send(runtime.redis, waiting, two_minutes_ago)  # a real message, still on the queue
    assert queued_notes(runtime.redis, QUEUE_SLACK) == {waiting.id}

    sent: list[tuple[str, list, str]] = []

    def record(name, args=None, task_id=None, **_options):
        sent.append((name, args, task_id))

    monkeypatch.setattr(celery_app.celery, "send_task", record)
    assert requeue_lost_tasks(runtime, time.time() - 119, lease_seconds=30) == 0  # within its lease: waits
    assert requeue_lost_tasks(runtime, time.time(), lease_seconds=30) == 1
    assert sent == [(CONSIDER, list(lost.args), None)]  # a task ID of its own (Celery's)
    assert requeue_lost_tasks(runtime, time.time(), lease_seconds=30) == 0  # noted again, as just sent

    # The resent message, run as a worker runs it: its alert posted once, its note dropped.
    assert tasks.consider_alert.apply(args=list(lost.args), task_id=lost.id).get().low == "posted"
    assert len(fake.posted(ALERTS)) == 1
    assert notes(runtime) == {waiting.id}


def test_a_task_that_ended_meanwhile_is_not_sent_again(runtime, monkeypatch) -> None:
    call = consider(add_judgment(runtime, score=1))
    task_notes.note(runtime.redis, [call], time.time() - 120)
    # The task ends (its message acknowledged, its note dropped) while the orphan check reads the messages.
    real_queued = queued_notes

    def reading_while_it_ends(client, *queues):
        found = real_queued(client, *queues)
        task_notes.done(client, call.id)
        return found

    monkeypatch.setattr("workers.sweeps.queued_notes", reading_while_it_ends)
    sent: list = []
    monkeypatch.setattr(celery_app.celery, "send_task", lambda *args, **kwargs: sent.append(args))
    assert requeue_lost_tasks(runtime, time.time(), lease_seconds=30) == 0
    assert sent == [] and notes(runtime) == set()


@pytest.mark.parametrize(
    ("state", "error", "kept"),
    [
        (states.SUCCESS, None, False),
        (states.FAILURE, RuntimeError("a bug"), False),  # sending it again would fail the same way
        (states.FAILURE, redis.exceptions.ConnectionError("Redis down"), True),  # an outage outlasted its retries
        (states.RETRY, Retry(), True),  # its retry is on the way
        (states.REJECTED, None, True),  # requeued
    ],
    ids=["success", "bug", "outage", "retry", "requeued"],
)
def test_a_note_is_dropped_only_when_its_task_ended_for_good(
    runtime, state: str, error: BaseException | None, kept: bool
) -> None:
    call = consider(7)
    task_notes.note(runtime.redis, [call], time.time())
    drop_the_note_of_an_ended_task(
        sender=tasks.consider_alert, args=list(call.args), kwargs={}, state=state, retval=error
    )
    assert notes(runtime) == ({call.id} if kept else set())


def test_a_task_that_ends_drops_its_note(runtime, fake) -> None:
    call = consider(add_judgment(runtime, score=1))
    task_notes.send(runtime.redis, call, time.time())
    assert notes(runtime) == {call.id}
    assert tasks.consider_alert.apply(args=list(call.args), task_id=call.id).get().low == "posted"
    assert notes(runtime) == set() and len(fake.posted(ALERTS)) == 1


def test_old_and_unreadable_notes_are_dropped(runtime) -> None:
    now = time.time()
    task_notes.note(runtime.redis, [consider(1)], now - 90_000)  # over a day old
    runtime.redis.hset(task_notes.KEY, "garbled", "not json")
    runtime.redis.zadd(task_notes.AT_KEY, {"garbled": now - 60})
    assert task_notes.overdue(runtime.redis, noted_before=now, now=now, limit=10) == {}
    assert notes(runtime) == set()
