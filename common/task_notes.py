"""The one record of work handed on: a task that nothing but its own message carries is noted in Redis before it is
sent, and its note dropped when the task ends for good. A message lost outright (kombu's window between taking it
off the queue and recording it as unacknowledged, a broker that lost it, a worker that died between a commit and the
send that should follow it) leaves its note behind, and beat's orphan check (workers.sweeps) sends it again.
Everything else is the broker's own guarantee: late acknowledgement and the visibility timeout bring back a message
a dead worker held (workers.lease keeps that timeout short).

A note is named by its task call, `call_id(task, args, kwargs)`: the orphan check finds a note's message, queued or
held, by the call its body carries, and a worker drops the note of the call it ran (workers.task_ends, on Celery's
`task_postrun`). The same call noted twice is one note: a run that notes before it commits and dies finds its note
again when the call is made once more. Each message keeps a task ID of its own (Celery's): the alert lease takes a
task ID for one task's attempts, so two sends of one call must not share one. Every noted task
is idempotent, so a message sent again is at worst run once more.

Noted: the bot's `capture_event`, `ingest_exchanges` (and `ingest_exchange`), `ingest_signal` and
`forget_exchange`, an alert's decision, an on-demand verdict, an outcome's follow-up and the sends to the bot's trace
tools.

Layout:
    relmon:task-notes      hash  task ID -> JSON {"task", "args", "kwargs"}
    relmon:task-notes:at   zset  task ID -> when it was noted
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import redis
from celery import states

from common import task_names
from common.celery_app import celery

log = logging.getLogger("relmon.task_notes")

KEY = "relmon:task-notes"
AT_KEY = f"{KEY}:at"
KEEP_SECONDS = 86_400  # a note nobody could act on for a day (a task failing with a bug) is dropped
NOTED = frozenset(
    {
        task_names.CAPTURE_EVENT,
        task_names.INGEST_EXCHANGE,
        task_names.INGEST_EXCHANGES,
        task_names.INGEST_SIGNAL,
        task_names.FORGET_EXCHANGE,
        task_names.CONSIDER_ALERT,
        task_names.DELIVER_VERDICT,
        task_names.FOLLOW_UP_OUTCOME,
        task_names.POST_OUTAGE_NOTICE,
        task_names.REDRAW_DIGEST,
        *task_names.TRACE_SENDS,
    }
)
_NAMESPACE = uuid.UUID("5b0d7a4e-43c1-4b9e-9d3c-6d1f0e2a7c11")


@dataclass(frozen=True)
class Call:
    """One task call: what a note holds and what its message carries."""

    task: str
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def id(self) -> str:
        # Computed once: a call of a hundred exchanges is a long text to hash.
        return call_id(self.task, self.args, self.kwargs)

    def to_json(self) -> str:
        return json.dumps({"task": self.task, "args": list(self.args), "kwargs": self.kwargs}, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: bytes | str) -> Call:
        value = json.loads(raw)
        return cls(value["task"], tuple(value.get("args") or ()), dict(value.get("kwargs") or {}))


def call_id(task: str, args: Sequence = (), kwargs: dict[str, Any] | None = None) -> str:
    """The note's and the message's ID: the same for the same call, in any process."""
    canonical = json.dumps([task, list(args), kwargs or {}], sort_keys=True, separators=(",", ":"))
    return str(uuid.uuid5(_NAMESPACE, hashlib.sha256(canonical.encode()).hexdigest()))


def note(client: redis.Redis, calls: Sequence[Call], now: float, *, sending: bool = False) -> list[bool]:
    """Note calls ahead of their send, keeping a note already there (a dead run's, still owed); for each call,
    whether this call noted it. `sending`: the message goes now, so the note's time is now (the orphan check waits
    a lease from the last send)."""
    if not calls:
        return []
    pipe = client.pipeline(transaction=True)
    for call in calls:
        pipe.hsetnx(KEY, call.id, call.to_json())
        pipe.zadd(AT_KEY, {call.id: now}, nx=not sending)
    replies = pipe.execute()
    return [bool(added) for added in replies[::2]]


def send(client: redis.Redis, call: Call, now: float, **options: Any) -> str:
    """Note the call, then send it: a note without a message is what the orphan check looks for. `options`:
    Celery's, e.g. the headers' reprs that keep an event's words out of them. Returns the note's ID."""
    return send_all(client, [call], now, [options])[0]


def send_all(client: redis.Redis, calls: Sequence[Call], now: float, options: Sequence[dict[str, Any]]) -> list[str]:
    """`send` for several calls at once: all noted in one transaction (one round trip), then each sent with its own
    `options`. A send that fails leaves its note (and those after it) to the caller's retry or the orphan check.
    Returns the notes' IDs."""
    note(client, calls, now, sending=True)
    for call, sent_with in zip(calls, options, strict=True):
        celery.send_task(call.task, args=list(call.args), kwargs=call.kwargs, **sent_with)
    return [call.id for call in calls]


def done(client: redis.Redis, task_id: str) -> None:
    """The task ended for good. A note left by a Redis error costs the orphan check one more (idempotent) run."""
    try:
        pipe = client.pipeline(transaction=True)
        pipe.hdel(KEY, task_id)
        pipe.zrem(AT_KEY, task_id)
        pipe.execute()
    except redis.RedisError as error:
        log.warning("task note not dropped", extra={"task_id": task_id, "error": repr(error)[:200]})


def ended_for_good(state: str | None, error: BaseException | None, *, outage: bool) -> bool:
    """Whether a noted task's run ends its note: it succeeded, or failed for good with something other than an
    outage (a bug: sending it again would fail the same way). A retry or a requeued message is still on its way,
    and a run that gave up on an outage (Redis or the database down longer than its retries) is left to the orphan
    check, which sends it again once the outage is over."""
    if state == states.SUCCESS:
        return True
    return state == states.FAILURE and error is not None and not outage


def overdue(client: redis.Redis, *, noted_before: float, now: float, limit: int) -> dict[str, Call]:
    """Notes older than `noted_before`, oldest first, by task ID; older than KEEP_SECONDS, or unreadable: dropped."""
    for stale in client.zrangebyscore(AT_KEY, "-inf", now - KEEP_SECONDS):
        done(client, _text(stale))
    ids = [_text(raw) for raw in client.zrangebyscore(AT_KEY, "-inf", noted_before, start=0, num=limit)]
    if not ids:
        return {}
    found: dict[str, Call] = {}
    for task_id, raw in zip(ids, client.hmget(KEY, ids), strict=True):
        try:
            if raw is None:
                raise ValueError("no call")  # ended between the two reads
            found[task_id] = Call.from_json(raw)
        except (ValueError, KeyError, TypeError):
            done(client, task_id)
    return found


def still_noted(client: redis.Redis, task_ids: Sequence[str]) -> list[str]:
    """The notes of `task_ids` not dropped meanwhile (their task ended while the messages were read)."""
    if not task_ids:
        return []
    pipe = client.pipeline(transaction=False)
    for task_id in task_ids:
        pipe.hexists(KEY, task_id)
    return [task_id for task_id, there in zip(task_ids, pipe.execute(), strict=True) if there]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
