"""Which pairs have a task message in Redis: waiting on the judging queue, or held (unacknowledged) by a worker.

The orphan check (workers.tasks.sweeper.requeue_orphans) re-enqueues a pending or settling pair that has none: its
message was lost in kombu's window between taking it off the list and recording it as unacknowledged, or never
published. Messages are kombu's JSON envelopes; their body (base64 JSON) is `[args, kwargs, embed]`, and relmon's
settle and judge tasks take the pair's ID first.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable

from common import task_names

PAIR_TASKS = frozenset({task_names.SETTLE_PAIR, task_names.JUDGE_PAIR})
UNACKED_KEY = "unacked"  # kombu's Redis transport: delivery tag → [envelope, exchange, routing key]
MAX_READ = 20_000  # a longer backlog is left to the stale sweeper: reading it would cost more than it saves


def pair_of(envelope: dict) -> int | None:
    """The pair a settle or judge message is about; None for any other message or a body that does not parse."""
    headers = envelope.get("headers") or {}
    if headers.get("task") not in PAIR_TASKS:
        return None
    try:
        body = envelope["body"]
        if (envelope.get("properties") or {}).get("body_encoding") == "base64":
            body = base64.b64decode(body)
        args = json.loads(body)[0]
        return int(args[0]) if args else None
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def pairs_in(raw_envelopes: Iterable[bytes | str], *, held: bool) -> set[int]:
    """Pair IDs in raw messages: queued envelopes, or (`held`) the unacked hash's [envelope, exchange, key]."""
    found: set[int] = set()
    for raw in raw_envelopes:
        try:
            value = json.loads(raw)
        except ValueError:
            continue
        envelope = value[0] if held and isinstance(value, list) and value else value
        if isinstance(envelope, dict) and (pair_id := pair_of(envelope)) is not None:
            found.add(pair_id)
    return found


def queued_pairs(client, queue: str) -> set[int] | None:
    """Pairs with a message on `queue` or held by a worker; None when there is too much to read cheaply.
    The queue is read before the held messages: a message moves from the first to the second when a worker
    takes it, so reading in that order sees it in one of them."""
    if client.llen(queue) > MAX_READ or client.hlen(UNACKED_KEY) > MAX_READ:
        return None
    waiting = pairs_in(client.lrange(queue, 0, -1), held=False)
    return waiting | pairs_in(client.hvals(UNACKED_KEY), held=True)
