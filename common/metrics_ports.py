"""Whether the worker and beat serve their metrics port, as each says in Redis: `relmon doctor` reads it.

A worker whose port another program holds works on without its metrics (common.metrics.serve_metrics_port): only
its log said so. Each worker and beat now keeps a record in Redis, one per process, saying whether it serves its
port or why not ("port 9464 in use by another program"). The record lives `RECORD_TTL_SECONDS` and is rewritten
every `REFRESH_SECONDS` while the process runs (a stopped process's record goes by itself; a clean stop deletes
it), so the doctor reads what the processes running now say, on whichever host they run, without probing a port
from where it happens to run."""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import threading
import time
from dataclasses import asdict, dataclass

log = logging.getLogger("relmon.metrics")

KEY_PREFIX = "relmon:metrics-port:"
INDEX_KEY = "relmon:metrics-ports"  # the records' names, scored by when each expires
REFRESH_SECONDS = 30.0
RECORD_TTL_SECONDS = 90  # three refreshes: a record outlives one missed write, not a stopped process
MAX_RECORDS = 500  # read at most this many (a fleet of workers); more is not a deployment the doctor lists


@dataclass(frozen=True)
class PortReport:
    """What one worker or beat process says of its metrics port."""

    component: str  # "worker" | "beat"
    host: str  # the host name the process runs on (a container's id under docker-compose)
    pid: int
    port: int  # 0: turned off
    serving: bool
    problem: str | None = None  # why the port is not served, in a person's words

    def key(self) -> str:
        return f"{KEY_PREFIX}{self.component}:{self.host}:{self.pid}"


def unserved_reason(port: int, error_number: int | None, text: str | None) -> str:
    """Why a port could not be had, from the bind's error: the usual causes named as a person would."""
    if error_number == errno.EADDRINUSE:
        return f"port {port} in use by another program"
    if error_number == errno.EACCES:
        return f"port {port} may not be opened by this user (ports below 1024 need privileges)"
    if error_number == errno.EADDRNOTAVAIL:
        return f"port {port}: the address to listen on is not on this host"
    return f"port {port} cannot be opened ({text or 'error ' + str(error_number)})"


def report_for(component: str, port: int, error: OSError | None) -> PortReport:
    """This process's report: serving `port`, off (0), or not served because of `error`."""
    host, pid = socket.gethostname(), os.getpid()
    if error is not None:
        return PortReport(component, host, pid, port, False, unserved_reason(port, error.errno, error.strerror))
    return PortReport(component, host, pid, port, serving=bool(port))


def write(redis_client, report: PortReport, ttl: int = RECORD_TTL_SECONDS) -> None:
    """The record, and its name in the index the doctor reads (no SCAN of a keyspace Celery shares). The index
    forgets names whose record expired long ago; a name whose record is gone is skipped by the reader."""
    now = time.time()
    with redis_client.pipeline() as pipe:
        pipe.set(report.key(), json.dumps(asdict(report)), ex=ttl)
        pipe.zadd(INDEX_KEY, {report.key(): now + ttl})
        pipe.zremrangebyscore(INDEX_KEY, "-inf", now - ttl)
        pipe.expire(INDEX_KEY, ttl * 2)
        pipe.execute()


def forget(redis_client, report: PortReport) -> None:
    with redis_client.pipeline() as pipe:
        pipe.delete(report.key())
        pipe.zrem(INDEX_KEY, report.key())
        pipe.execute()


def read_all(redis_client) -> list[PortReport]:
    """Every live record, by component, host and pid; a record gone or that does not parse is skipped."""
    keys = redis_client.zrange(INDEX_KEY, 0, MAX_RECORDS - 1)
    reports = []
    for raw in redis_client.mget(keys) if keys else []:
        try:
            reports.append(PortReport(**json.loads(raw)))
        except (TypeError, ValueError):  # expired since it was indexed (None), or not ours
            continue
    return sorted(reports, key=lambda report: (report.component, report.host, report.pid))


class PortReporter:
    """Keeps this process's record in Redis, rewritten every REFRESH_SECONDS from a daemon thread. Redis out of
    reach is logged once and retried: the record is a courtesy to the doctor, never a reason to stop."""

    def __init__(self, redis_client, report: PortReport, interval: float = REFRESH_SECONDS) -> None:
        self.redis, self.report, self.interval = redis_client, report, interval
        self._stopped = threading.Event()
        self._failing = False

    def start(self) -> PortReporter:
        self.write_once()
        threading.Thread(target=self._run, name="relmon-metrics-port", daemon=True).start()
        return self

    def write_once(self) -> None:
        try:
            write(self.redis, self.report, ttl=max(RECORD_TTL_SECONDS, int(self.interval * 3)))
        except Exception as error:  # Redis down or restarting: the next refresh writes it again
            if not self._failing:
                log.info("metrics port not recorded in Redis", extra={"error": type(error).__name__})
            self._failing = True
        else:
            self._failing = False

    def _run(self) -> None:
        while not self._stopped.wait(self.interval):
            self.write_once()

    def stop(self) -> None:
        """The process is stopping: its record goes now rather than at its TTL."""
        self._stopped.set()
        with contextlib.suppress(Exception):  # gone with its TTL anyway
            forget(self.redis, self.report)
