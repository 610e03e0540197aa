"""Which pairs and which noted tasks have a task message in Redis: waiting on a queue, or held (unacknowledged) by
a worker.

The orphan check (workers.sweeps, run by requeue_orphans) re-enqueues a pending or settling pair that has none, and
sends again a noted task (common.task_notes) that has none: its message was lost in kombu's window between taking
it off the list and recording it as unacknowledged, or never published. Messages are kombu's JSON envelopes; their
body (base64 JSON) is `[args, kwargs, embed]`; relmon's settle and judge tasks take the pair's ID first. A noted
task's message is matched to its note by the call its body carries.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

from common import task_names
from common.task_notes import NOTED, call_id

T = TypeVar("T")

PAIR_TASKS = frozenset({task_names.SETTLE_PAIR, task_names.JUDGE_PAIR})
UNACKED_KEY = "unacked"  # kombu's Redis transport: delivery tag → [envelope, exchange, routing key]
MAX_READ = 20_000  # a longer backlog is left to the stale sweeper: reading it would cost more than it saves


def _body(envelope: dict) -> list:
    body = envelope["body"]
    if (envelope.get("properties") or {}).get("body_encoding") == "base64":
        body = base64.b64decode(body)
    return json.loads(body)


def pair_of(envelope: dict) -> int | None:
    """The pair a settle or judge message is about; None for any other message or a body that does not parse."""
    headers = envelope.get("headers") or {}
    if headers.get("task") not in PAIR_TASKS:
        return None
    try:
        args = _body(envelope)[0]
        return int(args[0]) if args else None
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def note_of(envelope: dict) -> str | None:
    """The note's ID of a noted task's message (the call its body carries); None for any other message."""
    task = (envelope.get("headers") or {}).get("task")
    if task not in NOTED:
        return None
    try:
        args, kwargs = _body(envelope)[:2]
        return call_id(task, args, kwargs)
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def _found_in(raw_envelopes: Iterable[bytes | str], *, held: bool, read: Callable[[dict], T | None]) -> set[T]:
    found: set[T] = set()
    for raw in raw_envelopes:
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        envelope = value[0] if held and isinstance(value, list) and value else value
        if isinstance(envelope, dict) and (item := read(envelope)) is not None:
            found.add(item)
    return found


def _queued(client, queues: Sequence[str], read: Callable[[dict], T | None]) -> set[T] | None:
    """What `read` finds in the messages on the queues or held by a worker; None when there is too much to read
    cheaply. The queues are read before the held messages: a message moves from a queue to the held ones when a
    worker takes it, so reading in that order sees it in one of them."""
    if any(client.llen(queue) > MAX_READ for queue in queues) or client.hlen(UNACKED_KEY) > MAX_READ:
        return None
    waiting = set().union(*(_found_in(client.lrange(queue, 0, -1), held=False, read=read) for queue in queues))
    return waiting | _found_in(client.hvals(UNACKED_KEY), held=True, read=read)


def queued_pairs(client, queue: str) -> set[int] | None:
    """Pairs with a message on `queue` or held by a worker; None when there is too much to read cheaply."""
    return _queued(client, [queue], pair_of)


def queued_notes(client, *queues: str) -> set[str] | None:
    """The notes (task IDs) of noted tasks with a message on one of `queues` or held by a worker; None when there is
    too much to read."""
    return _queued(client, queues, note_of)
