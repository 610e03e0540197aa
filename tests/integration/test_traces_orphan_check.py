"""Trace sends lost between their note and their message: the orphan check sends again only a noted send whose
message is gone, and the send it sent again lands once on the trace (the fake Langfuse).
The tasks run eagerly (Celery's own retry path, without the countdowns); judgments are real rows in SQLite and
PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

import workers.task_ends  # noqa: F401  (drops a note when its task ends)
from common import celery_app, task_names, task_notes
from common.celery_app import QUEUE_JUDGE, QUEUE_SLACK
from common.runtime import Runtime
from tests.fakes.langfuse_server import FakeLangfuse
from tests.trace_helpers import judged, signalled
from workers.judging.queued import queued_notes
from workers.sweeps import requeue_lost_tasks
from workers.tasks.traces import send_langfuse_outcome


def orphaned_send(runtime: Runtime) -> tuple[task_notes.Call, str]:
    """A worker noted a signal's send, committed the signal and died before queueing it: its note is all that is
    left. Another send's message waits on the judge queue. Returns the lost send and the waiting one's note."""
    pair_id = signalled(runtime, judged(runtime))
    waiting = task_notes.Call(task_names.SEND_LANGFUSE_SCORES, (judged(runtime, ts="1767225600.000200"),))
    two_minutes_ago = time.time() - 120
    lost = task_notes.Call(task_names.SEND_LANGFUSE_OUTCOME, (pair_id, "reask"))
    assert task_notes.note(runtime.redis, [lost], two_minutes_ago) == [True]  # noted before the commit; no message
    task_notes.send(runtime.redis, waiting, two_minutes_ago)  # on the queue
    assert queued_notes(runtime.redis, QUEUE_SLACK, QUEUE_JUDGE) == {waiting.id}
    return lost, waiting.id


def kept_sends(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, list, str]]:
    """From now on, the tasks sent by name, kept instead of queued."""
    sent: list[tuple[str, list, str]] = []

    def record(name, args=None, task_id=None, **_options):
        sent.append((name, args, task_id))

    monkeypatch.setattr(celery_app.celery, "send_task", record)
    return sent


def test_the_orphan_check_sends_again_only_a_noted_send_whose_message_is_gone(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the note is a lease old the orphan check sends the lost one again, and only it."""
    runtime = runtime_on(langfuse.url)
    lost, _ = orphaned_send(runtime)
    sent = kept_sends(monkeypatch)
    assert requeue_lost_tasks(runtime, time.time() - 100, lease_seconds=30) == 0  # within its lease: waits
    assert requeue_lost_tasks(runtime, time.time(), lease_seconds=30) == 1
    assert sent == [(lost.task, list(lost.args), None)]


def test_a_send_the_orphan_check_sent_again_lands_once(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run, it puts the score on the trace once and drops its note; the waiting send's note stays."""
    runtime = runtime_on(langfuse.url)
    lost, waiting_note = orphaned_send(runtime)
    pair_id = lost.args[0]
    sent = kept_sends(monkeypatch)
    assert requeue_lost_tasks(runtime, time.time(), lease_seconds=30) == 1
    [(_, args, task_id)] = sent
    assert send_langfuse_outcome.apply(args=args, task_id=task_id).get() == "sent"  # the message sent again, run
    assert langfuse.posts == {f"relmon-pair-{pair_id}-reask": 1}
    assert {raw.decode() for raw in runtime.redis.hkeys(task_notes.KEY)} == {waiting_note}
