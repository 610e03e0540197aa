"""The broker seen from a test: the positive sign that every task sent so far has run.

Tasks are acknowledged late (common.celery_app): a message stays on its queue until a worker takes it and in
Redis's `unacked` hash until the task ended, retries and countdowns included (a retry is published before its
message is acknowledged). So a broker with nothing queued and nothing held has run everything it was given,
and whatever a late duplicate would have done is done: a test checks an absence after this, not after a sleep.

    wait_until_idle(redis_url)  # every task ran
    assert len(slack.posted(ALERTS)) == 1  # and none posted twice
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterable

import redis
from celery import Celery

from common.celery_app import QUEUES
from tests.processes import wait_for
from workers.judging.queued import UNACKED_KEY

# kombu takes a message off its list (BRPOP) a moment before it records it as held: one look can see neither.
# Two looks this far apart, idle at both, cannot both fall in that moment for the same message.
SECOND_LOOK_SECONDS = 0.3


def waiting_messages(client: redis.Redis) -> int:
    """Messages queued for relmon's workers or held by one (delivered, not yet acknowledged)."""
    return sum(client.llen(queue) for queue in QUEUES) + client.hlen(UNACKED_KEY)


class IdleWatch:
    """Called again and again (a `wait_for` condition): True once every look for SECOND_LOOK_SECONDS found
    nothing queued or held. `before_each_look`: what a supervisor does meanwhile (a test that kills workers
    replaces them, or their held messages never come back)."""

    def __init__(self, client: redis.Redis, before_each_look: Callable[[], object] | None = None) -> None:
        self.client = client
        self.before_each_look = before_each_look
        self.idle_since: float | None = None

    def __call__(self) -> bool:
        if self.before_each_look is not None:
            self.before_each_look()
        if waiting_messages(self.client):
            self.idle_since = None
            return False
        if self.idle_since is None:
            self.idle_since = time.monotonic()
        return time.monotonic() - self.idle_since >= SECOND_LOOK_SECONDS


def wait_until_idle(
    redis_url: str,
    *,
    timeout: float = 60.0,
    before_each_look: Callable[[], object] | None = None,
    what: str = "every task run (nothing queued or held)",
) -> None:
    """Wait until nothing is queued or held, seen over SECOND_LOOK_SECONDS (IdleWatch)."""
    client = redis.Redis.from_url(redis_url)
    try:
        wait_for(IdleWatch(client, before_each_look), timeout=timeout, interval=0.1, what=what)
    finally:
        client.close()


def publish_in_bulk(app: Celery, client: redis.Redis, task: str, calls: Iterable[list], queue: str) -> int:
    """Publish one `task` message per argument list on `queue`, as Celery would, in one Redis round trip: the first
    message is Celery's own (published to a queue no worker serves, and taken back), the others are copies of it
    with their own task ID, delivery tag and arguments. Celery's send_task costs milliseconds per message on a busy
    machine (a 10,000-message backlog took 45 s); this takes well under one. Returns how many were published."""
    scratch = f"{queue}.template"
    app.send_task(task, args=[], queue=scratch)
    template = json.loads(client.rpop(scratch))
    _args, kwargs, embed = json.loads(base64.b64decode(template["body"]))
    pipe = client.pipeline(transaction=False)
    count = 0
    for args in calls:
        task_id = str(uuid.uuid4())
        body = base64.b64encode(json.dumps([args, kwargs, embed]).encode()).decode()
        headers = {**template["headers"], "id": task_id, "root_id": task_id, "argsrepr": repr(args)}
        properties = {**template["properties"], "correlation_id": task_id, "delivery_tag": str(uuid.uuid4()),
                      "delivery_info": {"exchange": queue, "routing_key": queue}}  # fmt: skip
        pipe.lpush(queue, json.dumps({**template, "body": body, "headers": headers, "properties": properties}))
        count += 1
    pipe.execute()
    return count
