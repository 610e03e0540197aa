"""Events handed to a worker that no worker has captured yet, in Redis.

The bot notes each event it hands on (`capture_event`, the task's name in the note) before it publishes the task
(bot.publishing); the worker drops the note once the event is captured or its answer stored. A task message lost
outright (kombu's window between taking a message off the queue and recording it as unacknowledged, a broker that
lost it) leaves its note behind, and the orphan check (workers.sweeps) sends the task again: the database was never
needed to keep it.

Layout:
    relmon:capture:handoff      hash  id -> JSON of the task's keyword arguments
    relmon:capture:handoff:at   zset  id -> when the bot noted it
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import redis

KEY = "relmon:capture:handoff"
AT_KEY = f"{KEY}:at"
KEEP_SECONDS = 86_400  # a note nobody could act on for a day (a task failing with a bug) is dropped


def new_id() -> str:
    return uuid.uuid4().hex


def note(client: redis.Redis, handoff_id: str, task: str, kwargs: dict[str, Any], now: float) -> None:
    """Note the task call `task(**kwargs)` before it is sent, in one transaction."""
    pipe = client.pipeline(transaction=True)
    pipe.hset(KEY, handoff_id, json.dumps({"task": task, **kwargs}, separators=(",", ":")))
    pipe.zadd(AT_KEY, {handoff_id: now})
    pipe.execute()


def task_of(note: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A note's task name and its keyword arguments."""
    return note["task"], {key: value for key, value in note.items() if key != "task"}


def shown(kwargs: dict[str, Any]) -> dict[str, str]:
    """`send_task` options for a noted task's message: its headers' repr of the arguments names the note, never
    the event's words (Celery would repr them all and log them at debug level)."""
    return {"argsrepr": "()", "kwargsrepr": repr({"handoff": kwargs.get("handoff")})}


def done(client: redis.Redis, handoff_id: str | None) -> None:
    if not handoff_id:
        return
    pipe = client.pipeline(transaction=True)
    queue_done(pipe, handoff_id)
    pipe.execute()


def queue_done(pipe, handoff_id: str) -> None:
    """`done`'s commands, queued on a pipeline of the caller's (the capture's mark of what it stored)."""
    pipe.hdel(KEY, handoff_id)
    pipe.zrem(AT_KEY, handoff_id)


def overdue(client: redis.Redis, *, noted_before: float, now: float, limit: int) -> dict[str, dict[str, Any]]:
    """Notes older than `noted_before` (oldest first), by ID; notes kept longer than KEEP_SECONDS are dropped."""
    stale = client.zrangebyscore(AT_KEY, "-inf", now - KEEP_SECONDS)
    for handoff_id in stale:
        done(client, handoff_id.decode() if isinstance(handoff_id, bytes) else handoff_id)
    ids = client.zrangebyscore(AT_KEY, "-inf", noted_before, start=0, num=limit)
    if not ids:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for raw_id, raw in zip(ids, client.hmget(KEY, ids), strict=True):
        handoff_id = raw_id.decode() if isinstance(raw_id, bytes) else raw_id
        if raw is None:
            client.zrem(AT_KEY, handoff_id)  # done between the two reads
            continue
        found[handoff_id] = json.loads(raw)
    return found
