"""The Celery app, with settings chosen for an I/O-bound LLM workload. Each setting says why."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from celery import Celery
from kombu import Exchange, Queue

from capture.pairing import is_tombstone
from common import task_names
from common.celery_task import KeepMessageTask
from store.settings import Settings

log = logging.getLogger("relmon.celery")

QUEUE_JUDGE = "relmon.judge"  # capture, settle and judge answers; watch outcomes; beat's sweeps
QUEUE_SLACK = "relmon.slack"  # post alerts, on-demand verdicts, digests (task_names.POSTING)
QUEUE_FORGET = "relmon.forget"  # a deletion's capture, its scrubs and the AOF rewrite after it (task_names.FORGETTING)
QUEUES = (QUEUE_JUDGE, QUEUE_SLACK, QUEUE_FORGET)  # every worker serves all three


def route_task(
    name: str, args: Any, kwargs: Mapping[str, Any] | None, options: Mapping[str, Any], task: Any = None, **_: Any
) -> dict[str, str] | None:
    """The queue of a task (Celery's router; None: the judge queue). Posting has its own queue, and so has a
    deletion, from its event to the scrub of its copies: a backlog of judging (thousands of pairs after an outage)
    holds neither up, since each worker takes from its queues in turn. A deletion's `capture_event` goes there too
    (the scrub starts from it); a message captured after its tombstone is dropped (workers.live_capture), so it may
    overtake the events before it. A person's edit goes there too: it may take words out, and it sets off the
    outcome follow-ups of the answers before it, whose redraws must not run ahead of a deletion sent before the
    edit (on another queue, a redraw set off by the edit showed a deleted answer's words once more). A bot's edits
    (its streams, in their thousands) stay in order with the rest of its answer's capture."""
    if name in task_names.POSTING:
        return {"queue": QUEUE_SLACK}
    if name in task_names.FORGETTING or (name == task_names.CAPTURE_EVENT and _forgets(kwargs)):
        return {"queue": QUEUE_FORGET}
    return None


def _forgets(kwargs: Mapping[str, Any] | None) -> bool:
    """Whether a `capture_event` call carries a message's deletion (message_deleted, or a thread root's tombstone)
    or a person's edit (a message_changed whose message no bot sent)."""
    entry = (kwargs or {}).get("entry")
    body = entry.get("body") if isinstance(entry, dict) else None
    event = body.get("event") if isinstance(body, dict) else None
    if not isinstance(event, dict):
        return False
    if event.get("subtype") == "message_deleted" or is_tombstone(event):
        return True
    message = event.get("message")
    return (
        event.get("subtype") == "message_changed"
        and isinstance(message, dict)
        and not message.get("bot_id")
        and message.get("subtype") != "bot_message"
    )


def restore_interval(visibility_timeout: float) -> int:
    """Seconds between sweeps for abandoned (unacked, timed-out) messages: a fifth of the timeout, 1 to 60 s."""
    return int(min(60, max(1, visibility_timeout // 5)))


RESTORE_LOCK_SECONDS = 10


def celery_config(settings: Settings, broker_url: str) -> dict:
    return {
        "broker_url": broker_url,
        # Results live in SQL, not in the broker: no result backend, nothing to expire.
        "result_backend": None,
        "task_ignore_result": True,
        # One (disabled) backend object for the process, not one per thread: Celery builds a thread's own on its
        # first task, scanning every installed package's entry points (about 15 ms), 64 times per worker.
        "result_backend_thread_safe": True,
        # Acknowledge after the task ran: a worker killed with -9 mid-judgment loses nothing. What brings its
        # messages back is Redis, not the worker: they stay in the `unacked` hash until their lease (the
        # visibility timeout below) lapses, then a live worker restores them; the sweeper's orphan check
        # re-enqueues a pair whose message was lost outright. Tasks are idempotent for this.
        "task_acks_late": True,
        # Does nothing under the threads pool (no child process can die alone: the whole worker dies, and the
        # visibility timeout applies). Kept so that the prefork pool, if anyone switches to it, requeues the
        # message of a killed child at once instead of acknowledging it as failed.
        "task_reject_on_worker_lost": True,
        # One reserved message per execution slot: a dying worker strands few messages, and
        # slow LLM calls do not hoard work another worker could take.
        "worker_prefetch_multiplier": 1,
        # Judging waits on the network: a thread pool keeps many LLM calls in flight per process.
        # (The threads pool keeps the consumer that restores unacked messages; gevent/eventlet do not.)
        "worker_pool": "threads",
        "worker_concurrency": settings.worker_concurrency,
        "broker_transport_options": {
            # RELMON_VISIBILITY_TIMEOUT, 30 s by default: a lease, not a deadline. With late acks Redis keeps every
            # delivered message in its `unacked` set, scored by when it was delivered; a live worker renews the
            # score of each message it holds (running, or waiting for its countdown) every sixth of the lease
            # (workers.lease), and any worker re-queues those whose lease lapsed. So a SIGKILLed worker's tasks are
            # back on the queue about 30 s later, and a countdown of any length is never handed out twice.
            "visibility_timeout": settings.visibility_timeout_seconds,
            # How often a worker looks for such abandoned messages: a cheap sorted-set range query. kombu's
            # default (10 s x throttle 10) would add up to 100 s to a short test timeout.
            "unacked_restore_interval": restore_interval(settings.visibility_timeout_seconds),
            "unacked_restore_throttle": 1,
            # The lock one worker takes while it restores: a worker killed holding it would stop every restore
            # until it expires (kombu's default, 5 minutes). A restore takes milliseconds, and two restoring the
            # same message at once are safe (each one is a WATCHed transaction on the unacked hash).
            "unacked_mutex_expire": RESTORE_LOCK_SECONDS,
        },
        "broker_connection_retry_on_startup": True,
        # A dead broker must fail a publish quickly so the bot can answer Slack with an error.
        "broker_connection_timeout": 3,
        "broker_connection_max_retries": 3,
        # Task messages carry IDs, never texts: JSON is enough and safe.
        "task_serializer": "json",
        "accept_content": ["json"],
        "task_default_queue": QUEUE_JUDGE,
        # Each queue bound to its own exchange and key: with bare Queue(name), kombu binds relmon.slack to the
        # default exchange under relmon.judge's key, so a message published through that exchange lands in both.
        "task_queues": tuple(Queue(name, Exchange(name, type="direct"), routing_key=name) for name in QUEUES),
        # By the task names themselves, not by a prefix of them (the digest's tasks post too), and for
        # `capture_event` by what its event is (route_task).
        "task_routes": (route_task,),
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
        "timezone": "UTC",
        "enable_utc": True,
    }


def create_celery(settings: Settings, broker_url: str) -> Celery:  # for tools and benches
    app = Celery("relmon", task_cls=KeepMessageTask)
    app.conf.update(celery_config(settings, broker_url))
    return app


def broker_url_for(settings: Settings) -> str:
    """REDIS_URL, or the embedded Redis's unix socket in the data folder."""
    if settings.redis_url:
        return settings.redis_url
    return f"redis+socket://{embedded_socket_path(settings)}"


def embedded_socket_path(settings: Settings) -> str:
    return str((settings.data_dir / "redis" / "redis.sock").resolve())


# The one Celery app. Tasks register on it at import; `configure` points it at the settings' broker
# (called by `relmon worker`, `relmon bot`, tests) before anything is sent.
celery = Celery("relmon", task_cls=KeepMessageTask)


def configure(settings: Settings) -> Celery:
    celery.conf.update(celery_config(settings, broker_url_for(settings)))
    return celery
