"""`relmon worker` and `relmon beat`: start-up order matters (broker, schema, tasks, logging, runtime, then work)."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import logging
import os
import signal
import sys
from datetime import UTC, datetime
from types import FrameType

from common import celery_app, metrics
from common.metrics_ports import PortReporter
from common.runtime import Runtime, set_runtime
from common.startup import start_process
from store.settings import Settings
from workers.lease import LeaseRenewal
from workers.schedule import beat_schedule

log = logging.getLogger("relmon.worker")

# Celery logs every task received and succeeded, and the HTTP clients every request: five lines per judgment,
# each formatted and scrubbed while holding the GIL (about a tenth of a busy worker's CPU). Below DEBUG they
# are dropped; failures and retries still show (WARNING and up, and relmon's own "retrying" line).
PER_TASK_LOGGERS = ("celery.worker.strategy", "celery.app.trace", "httpx", "httpx2", "httpcore", "openai")


def quiet_per_task_logs(settings: Settings) -> None:
    if settings.log_level.upper() != "DEBUG":
        for name in PER_TASK_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


# Every task module (and the hook that drops a noted task's note when it ends); some are written by other parts of
# the project and may not exist in a given build.
TASK_MODULES = (
    "workers.task_ends",
    "workers.tasks.judging",
    "workers.tasks.sweeper",
    "workers.tasks.outage",
    "workers.tasks.events",
    "workers.tasks.ingest",
    "workers.tasks.forgetting",
    "workers.tasks.capture",
    "workers.tasks.outcomes",
    "workers.tasks.slack",
    "workers.tasks.digest",
    "workers.tasks.maintenance",
    "workers.tasks.canary",
    "workers.tasks.golden",
    "workers.tasks.topics",
    "workers.tasks.fixes",
    "workers.tasks.traces",
)


def import_task_modules() -> list[str]:
    """Import every task module, registering its tasks on the app; return their names."""
    for name in TASK_MODULES:
        importlib.import_module(name)
    return list(TASK_MODULES)


def prepare_celery_process(settings: Settings, component: str, *, niceness: int = 0) -> Runtime:
    """What the worker and beat add to the shared start-up: the task modules and the process's runtime.
    `niceness` (the worker's) is added once the embedded Redis (which serves the bot too) is up, and before any
    thread starts: on Linux a thread keeps the niceness it was created with, so os.nice after the metrics
    server's thread left that thread, and every request thread it spawns, at the old one."""
    start_process(settings, component)
    if niceness:
        # Before the task modules: importing numpy or scikit-learn starts OpenBLAS's native threads, which would
        # keep the old niceness. The threads and any process started from here on inherit it.
        os.nice(niceness)
    modules = import_task_modules()
    port_report = metrics.serve_process_metrics(settings, component)
    runtime = Runtime(settings)
    set_runtime(runtime)
    # Whether its metrics port is served, for `relmon doctor` (a port another program holds is only logged here).
    reporter = PortReporter(runtime.redis, port_report).start()
    atexit.register(reporter.stop)
    log.info("task modules loaded", extra={"modules": modules})
    return runtime


# Beat wakes at least this often (Celery's default is 5 minutes): a stop request that a start-up callback swallowed
# (see _install_beat_stop_handler) is seen within this time, and the ping health check knows the loop is alive.
BEAT_MAX_INTERVAL_SECONDS = 5.0
PING_TIMEOUT_SECONDS = 5.0


def _say_as_json(msg: str, f: object = None) -> None:
    """Celery's signal-handler messages ("worker: Warm shutdown (MainProcess)") as a JSON line on stderr. Written
    with os.write, no logging lock: it runs inside a signal handler."""
    now = datetime.now(UTC).isoformat(timespec="milliseconds")
    line = json.dumps({"time": now, "level": "info", "logger": "celery.apps.worker", "event": msg.strip()})
    with contextlib.suppress(OSError, AttributeError, ValueError):  # best effort, like Celery's own
        os.write(sys.__stderr__.fileno(), (line + "\n").encode())


def _json_only_celery_output() -> None:
    """Celery prints some lines itself, bypassing logging: keep stderr one JSON object per line."""
    import celery.apps.worker

    celery.apps.worker.safe_say = _say_as_json


def run_worker(settings: Settings) -> int:
    """A Celery worker on every queue (judging, posting, forgetting: common.celery_app.QUEUES), taken in turn: a
    threads pool (many LLM calls in flight), concurrency from settings. Refuses to start (exit 2, before anything
    starts) without the LLM (OPENAI_API_KEY, or OPENAI_BASE_URL for a keyless endpoint) or SLACK_BOT_TOKEN (it posts
    alerts and summaries): a worker without them would take every task and fail each one."""
    missing = settings.missing_message(events=False)
    if missing:
        print(missing, file=sys.stderr)
        return 2
    prepare_celery_process(settings, "worker", niceness=settings.worker_niceness)
    quiet_per_task_logs(settings)  # before the Worker exists: Celery caches "is INFO on?" at start-up
    _json_only_celery_output()
    queues = list(celery_app.QUEUES)
    celery_app.celery.steps["consumer"].add(LeaseRenewal)  # the visibility timeout is a lease it renews
    worker = celery_app.celery.Worker(
        pool_cls="threads",
        concurrency=settings.worker_concurrency,
        queues=queues,
        loglevel=settings.log_level.upper(),
        optimization="fair",
        # No gossip, mingle or worker heartbeats: they sync revokes and monitoring events we do not use, and
        # mingle alone adds a second to every start-up.
        without_gossip=True,
        without_mingle=True,
        without_heartbeat=True,
        # No ASCII-art banner on stdout, and no stdout/stderr redirection into the "celery.redirected" logger
        # (it made each line of a traceback an event of its own): errors reach logging with exc_info.
        quiet=True,
        redirect_stdouts=False,
    )
    log.info(
        "worker configured",
        extra={"node": worker.hostname, "queues": queues, "concurrency": settings.worker_concurrency},
    )
    worker.start()
    return int(worker.exitcode or 0)


def run_beat(settings: Settings) -> int:
    """The scheduler. Run exactly one; its state file lives in the data folder. It needs neither Slack nor the
    LLM: it only enqueues tasks (the digest is built and posted by a worker), so no setting is required here."""
    prepare_celery_process(settings, "beat")
    app = celery_app.celery
    app.conf.beat_schedule = beat_schedule(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    schedule_file = (settings.data_dir / "celerybeat-schedule").resolve()

    class RelmonBeat(app.Beat):  # type: ignore[name-defined,misc]
        def install_sync_handler(self, service) -> None:
            _install_beat_stop_handler(service)

    beat = RelmonBeat(
        schedule=str(schedule_file),
        loglevel=settings.log_level.upper(),
        max_interval=BEAT_MAX_INTERVAL_SECONDS,
        quiet=True,  # no banner on stdout: logs are JSON lines
        redirect_stdouts=False,
        # Beat answers `celery inspect ping` as celerybeat@<host> while its loop ticks: `relmon ping beat`.
        remote_control=True,
    )
    beat.run()
    return 0


def _install_beat_stop_handler(service) -> None:
    """SIGTERM and SIGINT stop beat. Celery's handler only raises SystemExit; raised while a garbage-collector
    callback runs (SQLAlchemy's pool finalizers, at start-up), Python prints "Exception ignored" and beat goes on
    until SIGKILL. The flag ends the loop at its next wake-up (BEAT_MAX_INTERVAL_SECONDS) even then."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("stopping", extra={"signal": signal.Signals(signum).name})
        service._is_shutdown.set()  # the loop's own condition; its `finally` saves the schedule
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


def ping(settings: Settings, which: str, hostname: str | None = None) -> int:
    """`relmon ping worker|beat`: ask this host's worker (celery@HOST) or beat (celerybeat@HOST) to answer over
    the broker; 0 when it does. The container health check: beat stops answering when its loop stalls."""
    from celery.beat import beat_nodename
    from celery.utils.nodenames import default_nodename

    app = celery_app.configure(settings)
    node = default_nodename(hostname) if which == "worker" else beat_nodename(hostname)
    try:
        replies = app.control.ping(destination=[node], timeout=PING_TIMEOUT_SECONDS)
    except Exception as error:  # the broker is unreachable: unhealthy, say why
        print(f"relmon ping: cannot reach the broker ({type(error).__name__})", file=sys.stderr)
        return 1
    if any(node in reply for reply in replies):
        print(f"{node}: pong")
        return 0
    print(f"relmon ping: {node} did not answer within {PING_TIMEOUT_SECONDS:.0f} s", file=sys.stderr)
    return 1
