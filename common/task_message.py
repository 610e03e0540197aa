"""A Celery task message as `send_task` publishes it through kombu's Redis transport, built without publishing it:
the bot pushes it in the same Redis round trip as the event's mark and note (bot.hand_on). One wake-up of Redis
instead of two before Slack gets its answer, and none of kombu's producer machinery on the way (about half a
millisecond of CPU per event).

Celery builds the headers and the body (`amqp.create_task_message`, its task protocol 2), with the arguments
`send_task` gives it for a task sent by name from outside a worker. What kombu adds on the way is done here as
kombu does it: the body serialized with the app's task serializer, then base64 (the Redis transport's body
encoding), the delivery properties, and the list it is pushed on (a direct queue's own name, at priority 0: kombu
publishes to a direct queue through the anonymous exchange). tests/integration/test_task_message.py compares it
with a message `send_task` queued, and the system tests' real workers run the bot's messages.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from celery import Celery
from kombu.serialization import dumps as serialize
from kombu.transport.virtual.base import Base64
from kombu.utils.json import dumps as json_dumps

_BODY = Base64()
_DELIVERY_MODES = {"transient": 1, "persistent": 2}


def fresh_uuid() -> str:
    """A random (version 4) UUID from the process's PRNG, not os.urandom: IDs must be unique, not secret, and a
    system call per ID is a chance to lose the core on a busy machine (three per event in the bot's profile).
    `random` reseeds itself in each forked process."""
    return str(uuid.UUID(int=random.getrandbits(128), version=4))


def task_message(
    app: Celery,
    name: str,
    kwargs: dict[str, Any] | None = None,
    *,
    args: tuple | list = (),
    kwargsrepr: str | None = None,
    countdown: float | None = None,
) -> tuple[str, str]:
    """(the Redis list to LPUSH onto, the message as JSON) for `app.send_task(name, args, kwargs, argsrepr=...,
    kwargsrepr=kwargsrepr, countdown=countdown)`: with `kwargsrepr` given (the bot's way, arguments it does not
    show) both reprs are the caller's and are properties too, as send_task makes them; else Celery's own reprs.
    Only for tasks routed to a direct queue (every relmon queue is one)."""
    queue = app.amqp.router.route({}, name)["queue"]
    if queue.exchange.type != "direct":
        raise ValueError(f"{name} is routed to a {queue.exchange.type} exchange: only direct queues are built here")
    task_id = fresh_uuid()
    shown = {} if kwargsrepr is None else {"argsrepr": repr(tuple(args)), "kwargsrepr": kwargsrepr}
    headers, properties, body, _ = app.amqp.create_task_message(
        task_id, name, args, kwargs or {}, reply_to=app.thread_oid, countdown=countdown, ignore_result=None, **shown
    )
    content_type, content_encoding, data = serialize(body, serializer=app.conf.task_serializer)
    delivery_mode = queue.exchange.delivery_mode or app.conf.task_default_delivery_mode
    message = {
        "body": _BODY.encode(data),
        "content-encoding": content_encoding,
        "content-type": content_type,
        "headers": headers,
        "properties": {
            **properties,
            # send_task's options that no parameter of the publish takes become properties too.
            **shown,
            "delivery_mode": _DELIVERY_MODES.get(delivery_mode, delivery_mode),
            "delivery_info": {"exchange": "", "routing_key": queue.name},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": fresh_uuid(),
        },
    }
    return queue.name, json_dumps(message)
