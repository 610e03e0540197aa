"""Follow-up tasks that nothing but their own message carries, noted in Redis until they finish.

A judgment's alert decision (`consider_alert`), an on-demand verdict (`deliver_verdict`) and an outcome's
follow-up (`follow_up_outcome`) leave no row behind that says they are still to do. A worker killed in kombu's
window between taking such a message off the queue and recording it as unacknowledged would lose it for good: the
alert never posted, the `/judge` never answered. So each is noted here when it is sent and dropped when its task
ends (done, or given up on); beat's orphan check (workers.sweeps) sends again a note over a lease old whose
message is nowhere in Redis. Each of these tasks is idempotent, so a task that ended between the two reads costs
one more run, not a second post.

The sends to the bot's trace tools (workers.tasks.traces) are noted too, and may be noted before what they send is
committed (`note`: a signal, a second opinion): a worker that dies between the commit and the queueing leaves the
note, which the orphan check sends; a send that finds nothing committed is skipped, and ends.

Layout:
    relmon:noted-tasks   zset  JSON [task name, args] -> when it was sent
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

import redis
from celery.exceptions import Reject, Retry

from common import task_names
from common.celery_app import celery

log = logging.getLogger("relmon.noted_tasks")
T = TypeVar("T")

KEY = "relmon:noted-tasks"
NOTED = frozenset(
    {task_names.CONSIDER_ALERT, task_names.DELIVER_VERDICT, task_names.FOLLOW_UP_OUTCOME, *task_names.TRACE_SENDS}
)
KEEP_SECONDS = 86_400  # a note nobody could act on for a day (a task failing with a bug) is dropped


def note_of(task: str, args: Sequence) -> str:
    """The note of one task call: its name and arguments, as the message's body holds them (JSON)."""
    return json.dumps([task, list(args)], separators=(",", ":"))


def send(client: redis.Redis, task: str, args: Sequence, now: float) -> None:
    """Note the task, then send it: a note without a message is what the orphan check looks for."""
    client.zadd(KEY, {note_of(task, args): now})
    celery.send_task(task, args=list(args))


def note(client: redis.Redis, calls: Sequence[tuple[str, Sequence]], now: float) -> list[bool]:
    """Note task calls ahead of their send, keeping a note already there (ZADD NX: a dead run's, still owed);
    for each call, whether this call noted it."""
    if not calls:
        return []
    pipe = client.pipeline(transaction=False)
    for task, args in calls:
        pipe.zadd(KEY, {note_of(task, args): now}, nx=True)
    return [bool(added) for added in pipe.execute()]


def done(client: redis.Redis, task: str, args: Sequence) -> None:
    """The task ended. A note left by a Redis error only costs the orphan check one more (idempotent) run."""
    try:
        client.zrem(KEY, note_of(task, args))
    except redis.RedisError as error:
        log.warning("task note not dropped", extra={"task": task, "error": repr(error)[:200]})


def run_noted(client: redis.Redis, task, run: Callable[[], T]) -> T:
    """Run a noted task's body (`task` the running Celery task): its note is dropped once it ends for good (done,
    refused, out of retries) and kept while a retry or a requeued message is on its way. The note names the
    message's own arguments, as they were sent."""
    ended = True
    try:
        return run()
    except (Retry, Reject):
        ended = False
        raise
    finally:
        if ended:
            done(client, task.name, task.request.args or ())


def overdue(client: redis.Redis, *, noted_before: float, now: float, limit: int) -> dict[str, tuple[str, list]]:
    """Notes older than `noted_before`, oldest first, as note -> (task, args); older than KEEP_SECONDS: dropped."""
    client.zremrangebyscore(KEY, "-inf", now - KEEP_SECONDS)
    found: dict[str, tuple[str, list]] = {}
    for raw in client.zrangebyscore(KEY, "-inf", noted_before, start=0, num=limit):
        note = raw.decode() if isinstance(raw, bytes) else raw
        try:
            task, args = json.loads(note)
        except ValueError:
            client.zrem(KEY, note)
            continue
        found[note] = (task, args)
    return found


def still_noted(client: redis.Redis, notes: Sequence[str]) -> list[str]:
    """The notes of `notes` not dropped meanwhile (their task ended while the messages were read)."""
    if not notes:
        return []
    pipe = client.pipeline(transaction=False)
    for note in notes:
        pipe.zscore(KEY, note)
    return [note for note, score in zip(notes, pipe.execute(), strict=True) if score is not None]
