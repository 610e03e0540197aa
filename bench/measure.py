"""What the benchmarks read off /proc, and their percentiles: one copy for bench.events, bench.pipeline,
bench.scaling and bench.load; and the fresh database each bench runs on."""

from __future__ import annotations

import http.client
import os
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from tests import slack_requests as sr
from tests.services import create_postgres_database

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def fresh_database(admin: str | None, sqlite_path: Path) -> tuple[str, str | None]:
    """(URL, name) of a fresh PostgreSQL database when `admin` (a server's admin URL) is given, else (the URL of a
    SQLite file at `sqlite_path`, None). The name is what `drop_postgres_database` takes afterwards."""
    if admin is not None:
        return create_postgres_database(admin)
    return f"sqlite:///{sqlite_path}", None


def process_tree(pid: int, *, children: bool = True) -> list[int]:
    """The process and (by default) all its descendants (from /proc/*/task/*/children)."""
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        found.append(current)
        if not children:
            continue
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                pending.extend(int(child) for child in (task / "children").read_text().split())
            except (OSError, ValueError):
                continue
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time the processes have used so far (a process that is gone counts nothing)."""
    ticks = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / CLOCK_TICKS


def machine_busy_seconds() -> float:
    """CPU time the whole machine spent not idle (all cores), from /proc/stat."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / CLOCK_TICKS


# The loop the performance notes have timed since 2026-12-01, as module-level code (its names are globals).
_REFERENCE_LOOP = compile("x = 0\nfor i in range(3_000_000):\n    x += i\n", "<reference loop>", "exec")


def reference_loop_ms() -> float:
    """CPU milliseconds of a fixed pure-Python loop: how fast this host runs Python right now. The development
    machines' speed varies by more than a change's effect (the loop took 250 to 970 ms on them), and a loaded
    system's CPU per answer differed by 1.6x between two machines where the loop did not: compare builds side by
    side, and read a single run's figure next to this one."""
    started = time.process_time()
    exec(_REFERENCE_LOOP, {})  # a constant loop, compiled above
    return 1000 * (time.process_time() - started)


def round_trip_us(client, count: int = 5_000) -> float:
    """CPU microseconds this process spends on one Redis PING over loopback: what a network round trip costs here.
    Most of relmon's CPU per answer is round trips (SQL statements, Redis commands, task messages), and their
    cost differs between hosts far more than the Python loop's (90 us on a nested-virtualization machine)."""
    client.ping()
    started = time.process_time()
    for _ in range(count):
        client.ping()
    return 1e6 * (time.process_time() - started) / count


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank value at `fraction` (0.99 for p99); NaN when there are no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))]


def status_mb(pid: int, field: str, *, children: bool = True) -> float:
    """A memory field of /proc/*/status (VmRSS, VmHWM ...) summed over a process and its descendants, in MB."""
    total_kb = 0
    for member in process_tree(pid, children=children):
        try:
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith(f"{field}:"):
                    total_kb += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total_kb / 1024


class SignedEventPoster:
    """Posts signed Slack event bodies to one URL over a keep-alive stdlib http.client connection per thread: a
    light client, as wrk would be, since the senders share the machine's two cores with what they measure."""

    def __init__(self, url: str, secret: str, *, timeout: float = 10.0) -> None:
        target = urlsplit(url)
        self.host, self.port, self.path = target.hostname, target.port, target.path
        self.secret, self.timeout = secret, timeout
        self._local = threading.local()

    def connect(self) -> http.client.HTTPConnection:
        """This thread's connection, opened now if it is not open yet."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._local.connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            connection.connect()
        return connection

    def post(self, body: bytes) -> int:
        """The HTTP status; raises OSError or HTTPException (and drops the connection, to reconnect next time)."""
        connection = self.connect()
        try:
            connection.request(
                "POST", self.path, body=body, headers={"Content-Type": "application/json", **sr.sign(body, self.secret)}
            )
            response = connection.getresponse()
            response.read()
            return response.status
        except (OSError, http.client.HTTPException):
            self.close()
            raise

    def close(self) -> None:
        connection = self._local.__dict__.pop("connection", None)
        if connection is not None:
            connection.close()
