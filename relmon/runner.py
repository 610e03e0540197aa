"""`relmon run`: everything on one machine. Embedded Redis when REDIS_URL is unset, SQLite when DATABASE_URL is
unset, migrations once, then `relmon bot`, `relmon worker` and `relmon beat` as child processes.

SIGINT and SIGTERM are forwarded to the children. `relmon run` supervises them: a child that exits on its own
is started again after a backoff (common.backoff: 1 s, doubling to 60 s, back to 1 s once it has run a minute),
with a log line naming it, its exit code and the wait. The embedded Redis stops last.
Also `relmon migrate` (`run_migrate`): bring the database schema up to date and exit (docker-compose runs it
once before the app starts).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from common.backoff import backoff_seconds
from common.startup import migrate_schema
from common.telemetry.logs import setup_logging
from common.telemetry.scrub import mask_url
from store.settings import Settings

log = logging.getLogger("relmon.run")

STOP_TIMEOUT_SECONDS = 30.0
EXIT_EMBEDDED_REDIS = 3  # 2: settings missing
POLL_SECONDS = 0.2
RESTART_BASE_SECONDS = 1.0
RESTART_CAP_SECONDS = 60.0
HEALTHY_AFTER_SECONDS = 60.0  # a child that ran this long before exiting is restarted after the shortest wait
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the child gets SIGTERM if `relmon run` itself is killed, so no orphan keeps running."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Child:
    name: str
    args: tuple[str, ...]
    process: subprocess.Popen
    started_at: float = field(default_factory=time.monotonic)
    restarts: int = 0  # in a row: reset once the child has run HEALTHY_AFTER_SECONDS
    restart_at: float | None = None  # when it exited: the monotonic time of its next start

    def running(self) -> bool:
        return self.process.poll() is None


def restart_delay(restarts_in_a_row: int, ran_seconds: float) -> float:
    """The wait before starting again a child that exited on its own after `ran_seconds`."""
    attempt = 0 if ran_seconds >= HEALTHY_AFTER_SECONDS else restarts_in_a_row
    return backoff_seconds(attempt, base=RESTART_BASE_SECONDS, cap=RESTART_CAP_SECONDS)


def _spawn(args: tuple[str, ...], env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        child_command(*args),
        env=env,
        stdin=subprocess.DEVNULL,
        # Its own group: a terminal's Ctrl-C reaches relmon run only, which forwards it once.
        process_group=0,
        preexec_fn=_die_with_parent,
    )


def supervise(child: Child, env: dict[str, str], now: float) -> None:
    """One look at a child: schedule a restart when it has exited, start it again when the wait is over."""
    if child.restart_at is None:
        if child.running():
            return
        ran = now - child.started_at
        if ran >= HEALTHY_AFTER_SECONDS:
            child.restarts = 0
        wait = restart_delay(child.restarts, ran)
        child.restart_at = now + wait
        log.error(
            "a child exited; restarting it",
            extra={
                "child": child.name,
                "exit_code": child.process.returncode,
                "ran_s": round(ran, 1),
                "restart_in_s": round(wait, 2),
                "restarts": child.restarts + 1,
            },
        )
        return
    if now >= child.restart_at:
        child.process = _spawn(child.args, env)
        child.started_at, child.restart_at = now, None
        child.restarts += 1
        log.info("child restarted", extra={"child": child.name, "pid": child.process.pid, "restarts": child.restarts})


def child_command(*args: str) -> list[str]:
    """`relmon ARGS` with this interpreter (no PATH lookup: works from a venv that is not activated)."""
    return [sys.executable, "-c", "import sys; from relmon.cli import main; sys.exit(main())", *args]


def child_environment(settings: Settings, broker_url: str | None) -> dict[str, str]:
    """The children's environment: ours, with the resolved Redis, database and data folder made explicit so
    every child uses the very same ones."""
    env = dict(os.environ)
    if broker_url:
        env["REDIS_URL"] = broker_url
    env["DATABASE_URL"] = settings.resolved_database_url
    env["RELMON_DATA_DIR"] = str(settings.data_dir.resolve())
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_migrate(settings: Settings) -> int:
    """`relmon migrate`: apply pending migrations (safe to run from several places at once on PostgreSQL)."""
    setup_logging(settings, "migrate")
    _migrate(settings)
    log.info("database migrated", extra={"database": mask_url(settings.resolved_database_url)})
    return 0


def _stop_children(children: list[Child], sig: int = signal.SIGTERM) -> None:
    for child in children:
        if child.running():
            with contextlib.suppress(ProcessLookupError):
                child.process.send_signal(sig)
    deadline = time.monotonic() + STOP_TIMEOUT_SECONDS
    for child in children:
        try:
            child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.error("child did not stop in time; killing it", extra={"child": child.name, "pid": child.process.pid})
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.process.pid, signal.SIGKILL)  # its group: gunicorn or Celery pool children too
            child.process.wait(timeout=10)
        log.info("child stopped", extra={"child": child.name, "exit_code": child.process.returncode})


def run_all(settings: Settings, port: int = 3000) -> int:
    missing = settings.missing_message()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    setup_logging(settings, "run")
    settings.data_dir.mkdir(parents=True, exist_ok=True)

    from common.embedded_redis import EmbeddedRedisError, ensure_embedded_redis

    try:
        embedded = ensure_embedded_redis(settings)
    except EmbeddedRedisError as error:
        # A setup problem with advice (socket path too long, redis-server would not start): one clear message.
        log.error("embedded redis failed", extra={"reason": type(error).__name__})
        print(f"relmon run: cannot start the embedded Redis: {error}", file=sys.stderr)
        return EXIT_EMBEDDED_REDIS
    children: list[Child] = []
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _migrate(settings)  # once, before any child starts: the children then find the schema current
        env = child_environment(settings, embedded.broker_url if embedded else None)
        for name, args in (
            ("bot", ("bot", "--port", str(port))),
            ("worker", ("worker",)),
            ("beat", ("beat",)),
        ):
            process = _spawn(args, env)
            children.append(Child(name, args, process))
            log.info("child started", extra={"child": name, "pid": process.pid})
        log.info(
            "relmon is running",
            extra={
                "port": port,
                "redis": "embedded" if embedded else mask_url(settings.redis_url),
                "database": mask_url(settings.resolved_database_url),
            },
        )
        while not received:
            for child in children:
                supervise(child, env, time.monotonic())
            time.sleep(POLL_SECONDS)
        if received:
            log.info("stopping", extra={"signal": signal.Signals(received[0]).name})
        _stop_children(children, received[0] if received else signal.SIGTERM)
        return 0
    finally:
        _stop_children([c for c in children if c.running()])
        if embedded is not None:
            embedded.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _migrate(settings: Settings) -> None:
    """A database that is down or a wrong URL raises StartupError: one line and exit 3, as for bot and worker."""
    migrate_schema(settings.resolved_database_url)
