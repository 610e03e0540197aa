"""`relmon worker` and `relmon beat`: start-up order matters (broker, schema, tasks, logging, runtime, then work)."""

from __future__ import annotations

import importlib
import logging

from store.db import Database
from store.settings import Settings
from workers import celery_app
from workers.runtime import Runtime, set_runtime
from workers.schedule import beat_schedule
from workers.telemetry import setup_logging

log = logging.getLogger("relmon.worker")

# Every task module; some are written by other parts of the project and may not exist in a given build.
_process_state: dict[str, object] = {}

# Celery logs every task received and succeeded, and the HTTP clients every request: five lines per judgment,
# each formatted and scrubbed while holding the GIL (about a tenth of a busy worker's CPU). Below DEBUG they
# are dropped; failures and retries still show (WARNING and up, and relmon's own "retrying" line).
PER_TASK_LOGGERS = ("celery.worker.strategy", "celery.app.trace", "httpx", "httpx2", "httpcore", "openai")


def quiet_per_task_logs(settings: Settings) -> None:
    if settings.log_level.upper() != "DEBUG":
        for name in PER_TASK_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


TASK_MODULES = (
    "workers.tasks.judging",
    "workers.tasks.capture",
    "workers.tasks.slack",
    "workers.tasks.digest",
    "workers.tasks.maintenance",
)


def import_task_modules() -> list[str]:
    """Import every task module, registering its tasks on the app; return their names."""
    for name in TASK_MODULES:
        importlib.import_module(name)
    return list(TASK_MODULES)


def _start_embedded_redis(settings: Settings):
    """No REDIS_URL: the embedded Redis in the data folder."""
    if settings.redis_url:
        return None
    from workers.embedded_redis import ensure_embedded_redis

    return ensure_embedded_redis(settings)


def prepare(settings: Settings, component: str) -> Runtime:
    """What the worker and beat share: logging, broker, schema, Celery configuration, tasks, runtime."""
    setup_logging(settings, component)
    redis_handle = _start_embedded_redis(settings)
    database = Database(settings.resolved_database_url, pool_size=min(settings.worker_concurrency, 20))
    database.migrate()
    database.dispose()
    celery_app.configure(settings)
    modules = import_task_modules()
    runtime = Runtime(settings)
    set_runtime(runtime)
    _process_state["embedded_redis"] = redis_handle  # referenced for the life of the process
    log.info("task modules loaded", extra={"modules": modules})
    return runtime


def run_worker(settings: Settings) -> int:
    """A Celery worker on both queues: a threads pool (many LLM calls in flight), concurrency from settings."""
    prepare(settings, "worker")
    quiet_per_task_logs(settings)  # before the Worker exists: Celery caches "is INFO on?" at start-up
    worker = celery_app.celery.Worker(
        pool_cls="threads",
        concurrency=settings.worker_concurrency,
        queues=[celery_app.QUEUE_JUDGE, celery_app.QUEUE_SLACK],
        loglevel=settings.log_level.upper(),
        optimization="fair",
        # No gossip, mingle or worker heartbeats: they sync revokes and monitoring events we do not use, and
        # mingle alone adds a second to every start-up.
        without_gossip=True,
        without_mingle=True,
        without_heartbeat=True,
    )
    worker.start()
    return int(worker.exitcode or 0)


def run_beat(settings: Settings) -> int:
    """The scheduler. Run exactly one; its state file lives in the data folder."""
    prepare(settings, "beat")
    app = celery_app.celery
    app.conf.beat_schedule = beat_schedule(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    schedule_file = (settings.data_dir / "celerybeat-schedule").resolve()
    beat = app.Beat(schedule=str(schedule_file), loglevel=settings.log_level.upper())
    beat.run()
    return 0
