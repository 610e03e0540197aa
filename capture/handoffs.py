"""Events and answers handed to a worker that no worker has captured or stored yet, in Redis.

The bot notes each event it hands on (`capture_event`, the task's name in the note) in the round trip that
deduplicates it (bot.hand_on); a capture notes each `capture_answer` task in the round trip that logs the message.
Each note is written before its task is sent, and dropped by the worker once the event is captured or the answer
stored. A task message lost outright (kombu's window between taking a message off the queue and recording it as
unacknowledged, a broker that lost it) leaves its note behind,
and the orphan check (workers.sweeps) sends the task again: the database was never needed to keep it.

Layout:
    relmon:capture:handoff      hash  id -> JSON of the task's keyword arguments
    relmon:capture:handoff:at   zset  id -> when the bot noted it
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import redis

KEY = "relmon:capture:handoff"
AT_KEY = f"{KEY}:at"
KEEP_SECONDS = 86_400  # a note nobody could act on for a day (a task failing with a bug) is dropped


def new_id() -> str:
    # From the PRNG, not os.urandom: unique, not secret, and no system call on the bot's way (common.task_message).
    return uuid.UUID(int=random.getrandbits(128), version=4).hex


def note(pipe, handoff_id: str, kwargs: dict[str, Any], now: float) -> None:
    """Queue the note on a pipeline (the bot's log write)."""
    pipe.hset(KEY, handoff_id, json.dumps(kwargs, separators=(",", ":")))
    pipe.zadd(AT_KEY, {handoff_id: now})


def task_of(note: dict[str, Any], default: str) -> tuple[str, dict[str, Any]]:
    """A note's task name (`default`, capture_answer's, when the note names none) and its keyword arguments."""
    return note.get("task", default), {key: value for key, value in note.items() if key != "task"}


def shown(kwargs: dict[str, Any]) -> dict[str, str]:
    """`send_task` options for a capture_answer message: its headers' repr of the arguments names the message,
    never its words (Celery would repr them all, the logged text included, and log them at debug level)."""
    named = {key: kwargs.get(key) for key in ("channel", "ts", "handoff")}
    return {"argsrepr": "()", "kwargsrepr": repr(named)}


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
