"""The state a scrape reports (the database's and Redis's counts, `common.metrics.StateCollector`), read at most
once per `STATE_MAX_AGE_SECONDS` and by one scrape at a time: a single-flight cache.

Why: the state is a dozen grouped counts over the whole database. Read at every scrape, a flood of scrapes (or a
few Prometheus replicas) would hold the bot's threads and its database connections, and Slack's events would wait
behind them for their ack. So a scrape serves the last reading while it is younger than 15 s (Prometheus's usual
interval); the first scrape after that reads again, and scrapes that come meanwhile reuse the previous reading at
once (or, when there is none yet, wait for the one being made).

One for every process of a component: gunicorn's processes share the reading through a file in the directory they
already share for their counters (`common.metrics.prepare_process`), under an exclusive `flock`, so the bot's two
processes read the state once per 15 s between them, not once each.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

STATE_MAX_AGE_SECONDS = 15.0
# A scrape that finds no reading yet and another one being made waits this long for it, then is told to retry.
FIRST_READING_WAIT_SECONDS = 10.0
POLL_SECONDS = 0.05
CACHE_FILE = "state.cache"  # not *.db: prometheus-client's MultiProcessCollector reads only those
LOCK_FILE = "state.lock"
_HEADER = b"# relmon state read at "


class StateBusy(Exception):
    """No reading yet, and another scrape is making the first one: retry in a moment."""


@dataclass(frozen=True)
class Reading:
    body: bytes
    started_at: float  # wall clock (time.time): comparable across the processes sharing the file


class SingleFlightState:
    """`get()` returns the state's exposition text, reading it (`read`) at most once per `max_age` seconds for
    every thread of this process and, with `directory`, every process sharing it."""

    def __init__(
        self,
        read: Callable[[], bytes],
        *,
        directory: Path | None = None,
        max_age: float = STATE_MAX_AGE_SECONDS,
        wait_seconds: float = FIRST_READING_WAIT_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._read = read
        self._directory = directory
        self._max_age = max_age
        self._wait_seconds = wait_seconds
        self._clock = clock
        self._reading: Reading | None = None
        self._reading_now = threading.Lock()  # this process's one reader

    def get(self) -> bytes:
        return self.latest_reading().body

    def latest_reading(self) -> Reading:
        known = self._latest()
        if known is not None and self._fresh(known):
            return known
        if self._reading_now.acquire(blocking=False):
            try:
                return self._refresh()
            finally:
                self._reading_now.release()
        # Another thread of this process is reading: its previous reading meanwhile, else wait for this one.
        return known if known is not None else self._wait()

    def _fresh(self, reading: Reading) -> bool:
        return 0 <= self._clock() - reading.started_at < self._max_age

    def _latest(self) -> Reading | None:
        """This process's last reading, or a newer one another process left in the shared file."""
        mine = self._reading
        if self._directory is None or (mine is not None and self._fresh(mine)):
            return mine
        shared = self._load()
        if shared is not None and (mine is None or shared.started_at > mine.started_at):
            self._reading = shared
            return shared
        return mine

    def _refresh(self) -> Reading:
        if self._directory is None:
            return self._read_now()
        with _exclusive(self._directory / LOCK_FILE) as mine:
            if not mine:  # another process is reading: its previous reading meanwhile, else wait for this one
                known = self._latest()
                return known if known is not None else self._wait()
            shared = self._latest()  # it may have finished just before we took the lock
            if shared is not None and self._fresh(shared):
                return shared
            reading = self._read_now()
            self._store(reading)
            return reading

    def _read_now(self) -> Reading:
        started = self._clock()
        reading = Reading(self._read(), started)
        self._reading = reading
        return reading

    def _wait(self) -> Reading:
        deadline = time.monotonic() + self._wait_seconds
        while time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
            known = self._latest()
            if known is not None:
                return known
        raise StateBusy

    def _load(self) -> Reading | None:
        assert self._directory is not None
        try:
            data = (self._directory / CACHE_FILE).read_bytes()
        except OSError:
            return None
        header, _, body = data.partition(b"\n")
        if not header.startswith(_HEADER):
            return None
        try:
            return Reading(body, float(header[len(_HEADER) :]))
        except ValueError:
            return None

    def _store(self, reading: Reading) -> None:
        """Written whole then renamed: a reader in another process sees the old file or the new, never half."""
        assert self._directory is not None
        handle, temporary = tempfile.mkstemp(dir=self._directory, prefix=".state-", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(_HEADER + repr(reading.started_at).encode() + b"\n" + reading.body)
            os.replace(temporary, self._directory / CACHE_FILE)
        except OSError:
            Path(temporary).unlink(missing_ok=True)  # the reading still serves this process


class _exclusive:
    """A non-blocking exclusive flock on `path`: `with _exclusive(p) as mine` (mine: False when another process
    holds it). The lock goes with the file descriptor, so a process that dies releases it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> bool:
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return True  # no lock to be had (a read-only directory): read without one, as a single process would
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self.fd)
            self.fd = None
            return False
        return True

    def __exit__(self, *_: object) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
