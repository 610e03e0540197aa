"""The Celery app, with settings chosen for an I/O-bound LLM workload. Each setting says why."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from celery import Celery, Task
from kombu import Exchange, Queue

from store.settings import Settings, delay_ceiling

log = logging.getLogger("relmon.celery")

QUEUE_JUDGE = "relmon.judge"  # settle and judge captured answers
QUEUE_SLACK = "relmon.slack"  # post alerts, on-demand verdicts, digests
QUEUES = (QUEUE_JUDGE, QUEUE_SLACK)


def restore_interval(visibility_timeout: float) -> int:
    """Seconds between sweeps for abandoned (unacked, timed-out) messages: a fifth of the timeout, 1 to 60 s."""
    return int(min(60, max(1, visibility_timeout // 5)))


# The conf key holding `store.settings.delay_ceiling`: the longest countdown a relmon task message may carry.
DELAY_CEILING = "relmon_delay_ceiling"


def bounded_delay(options: dict, ceiling: float | None, now: datetime | None = None) -> dict:
    """Publish options with the countdown or ETA cut to `ceiling` seconds from now (None: left as they are).
    A worker reserves a delayed message at once and holds it, unacknowledged, until it is due: one due after the
    visibility timeout would be handed out again by Redis, and run twice."""
    if ceiling is None:
        return options
    countdown, eta = options.get("countdown"), options.get("eta")
    if eta is not None:
        now = now or datetime.now(UTC)
        due = datetime.fromisoformat(eta) if isinstance(eta, str) else eta
        if due.tzinfo is None:
            due = due.replace(tzinfo=UTC)
        countdown = (due - now).total_seconds()
    if countdown is None or countdown <= ceiling:
        return options
    return {**options, "countdown": ceiling, "eta": None}


class RelmonTask(Task):
    """Every relmon task: its delayed messages (retries, autoretries, countdowns) never outlast the visibility
    timeout. Settings keeps the timeout above every delay it configures (judging backoff and Retry-After, the
    settle wait); the delays fixed in the code (Slack and digest retries, the alert summary's wait, database and
    Redis retries) are cut to the ceiling here, so under a short timeout they come sooner, never twice."""

    def apply_async(self, args=None, kwargs=None, task_id=None, producer=None, link=None, link_error=None, **options):
        ceiling = self.app.conf.get(DELAY_CEILING)
        bounded = bounded_delay(options, ceiling)
        if bounded is not options:
            log.debug("task delay cut to the ceiling", extra={"task": self.name, "ceiling_s": ceiling})
        return super().apply_async(args, kwargs, task_id, producer, link, link_error, **bounded)


def celery_config(settings: Settings, broker_url: str) -> dict:
    return {
        "broker_url": broker_url,
        # Results live in SQL, not in the broker: no result backend, nothing to expire.
        "result_backend": None,
        "task_ignore_result": True,
        # Acknowledge after the task ran: a worker killed with -9 mid-judgment loses nothing. What brings its
        # messages back is Redis, not the worker: they stay in the `unacked` hash until the visibility timeout
        # below, then a live worker restores them; the stale sweeper re-enqueues whatever is lost beyond that.
        # Tasks are idempotent for this.
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
            # RELMON_VISIBILITY_TIMEOUT, 2 h by default (tests lower it to see a killed worker's tasks come back
            # within seconds). A delayed message outlasting it would be handed out twice: Settings refuses one
            # not longer than the delays the settings configure (settle countdown, judging retries), and
            # RelmonTask cuts every other countdown to DELAY_CEILING. With late acks, Redis keeps every
            # delivered message in its `unacked` hash; any worker re-queues those older than this, so a
            # SIGKILLed worker's tasks are judged by whoever is alive (or by the same worker once restarted).
            "visibility_timeout": settings.visibility_timeout_seconds,
            # How often a worker looks for such abandoned messages: a cheap sorted-set range query. kombu's
            # default (10 s x throttle 10) would add up to 100 s to a short test timeout.
            "unacked_restore_interval": restore_interval(settings.visibility_timeout_seconds),
            "unacked_restore_throttle": 1,
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
        "task_routes": {"workers.tasks.slack.*": {"queue": QUEUE_SLACK}},
        "worker_hijack_root_logger": False,
        "worker_send_task_events": False,
        "timezone": "UTC",
        "enable_utc": True,
        DELAY_CEILING: delay_ceiling(settings),
    }


def create_celery(settings: Settings, broker_url: str) -> Celery:  # for tools and benches
    app = Celery("relmon")
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
celery = Celery("relmon", task_cls=RelmonTask)


def configure(settings: Settings) -> Celery:
    celery.conf.update(celery_config(settings, broker_url_for(settings)))
    return celery
