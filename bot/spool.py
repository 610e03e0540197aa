"""The bot's event spool: what capture cannot hand on (Redis, the broker or the database down) is kept on local
disk and handed on, in order and once, when they are back. Slack gets a 200 for a spooled event, so an outage of
any length never counts as failed deliveries (Slack turns an app's event subscriptions off when about 95% of
them fail within an hour).

One SQLite file per bot process in `RELMON_DATA_DIR/spool/`, written with `synchronous=FULL` (fsync'd before the
200). A process holds an exclusive lock on its own file; a drainer also takes over the file of a process that
died (its lock is free), drains it and removes it. Once is kept by capture's dedupe on `event_id`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
from kombu.exceptions import OperationalError as BrokerError
from sqlalchemy.exc import InterfaceError, OperationalError

from common import metrics

log = logging.getLogger("relmon.capture")

# What an outage raises in capture; anything else is a bug and still answers 500.
OUTAGE_ERRORS: tuple[type[BaseException], ...] = (
    redis.RedisError,
    BrokerError,
    OperationalError,
    InterfaceError,
    ConnectionError,
    TimeoutError,
)
DRAIN_EVERY_SECONDS = 1.0

# {"body": the Slack event envelope, "own": relmon's identity, as the listener saw them}, or {"kind": "exchanges",
# "exchanges": [...]}: a request's exchanges from the ingest API, one row (bot.publishing hands each kind on its way).
Entry = dict[str, Any]


def entry_id(entry: Entry) -> str | None:
    """What names an entry in a log line (never its words): a Slack event's id, or an exchange's (a request's
    first, and how many it holds)."""
    if "exchange" in entry:
        return entry["exchange"].get("id")
    if entry.get("exchanges"):
        return f"{entry['exchanges'][0].get('id')} (of {len(entry['exchanges'])})"
    return (entry.get("body") or {}).get("event_id")


class SpoolFile:
    """One spool file: an append-only table of entries, oldest first."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        # Drained events leave no text behind: deleted rows are overwritten with zeros (not just unlinked), and
        # the write-ahead log that still holds them is checkpointed and truncated once the spool is empty.
        self._db.execute("PRAGMA secure_delete=ON")
        self._db.execute("CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY AUTOINCREMENT, entry TEXT)")
        self._lock = threading.Lock()
        # The entries' bytes, kept as they come and go (the file itself does not shrink when they are drained).
        self._bytes = self._db.execute("SELECT coalesce(sum(length(entry)), 0) FROM entries").fetchone()[0]

    def add(self, entry: Entry) -> None:
        text = json.dumps(entry)
        with self._lock:
            self._db.execute("INSERT INTO entries (entry) VALUES (?)", (text,))
            self._bytes += len(text)

    def count(self) -> int:
        with self._lock:
            return self._db.execute("SELECT count(*) FROM entries").fetchone()[0]

    def size(self) -> int:
        """The bytes of the entries it holds."""
        with self._lock:
            return self._bytes

    def drain(self, publish: Callable[[Entry], None]) -> int:
        """Hand entries on, oldest first, each removed once handed on; stop at the first outage (order kept)."""
        done = 0
        while True:
            with self._lock:
                row = self._db.execute("SELECT id, entry FROM entries ORDER BY id LIMIT 1").fetchone()
            if row is None:
                if done:
                    self._forget_drained()
                return done
            try:
                publish(json.loads(row[1]))
            except OUTAGE_ERRORS:
                return done
            except Exception:  # a bug in this one entry: logged and dropped, so it cannot block the rest
                log.exception("spooled event could not be captured; dropped")
            with self._lock:
                self._db.execute("DELETE FROM entries WHERE id = ?", (row[0],))
                self._bytes -= len(row[1])
            done += 1

    def _forget_drained(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):  # busy (a reader): the next drain does it
            self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self._db.close()


def _try_lock(path: Path) -> int | None:
    """An exclusive lock on `path` (created), or None when a live process holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


class EventSpool:
    """This process's spool, and the drainer thread that hands it (and any dead process's) on."""

    def __init__(
        self,
        directory: Path,
        publish: Callable[[Entry], None],
        *,
        max_bytes: int = 512 * 1024 * 1024,
        on_full: Callable[[], None] = lambda: None,
    ) -> None:
        self.directory = directory
        self.publish = publish
        self.max_bytes, self.on_full = max_bytes, on_full
        self._full = False  # the spool filled and has not drained since: warned once
        self._own: SpoolFile | None = None
        self._pid: int | None = None
        self._guard = threading.Lock()

    def _file(self) -> SpoolFile:
        """This process's file and drainer, created on first use (after gunicorn's fork, in each worker)."""
        with self._guard:
            if self._own is None or self._pid != os.getpid():
                self.directory.mkdir(parents=True, exist_ok=True)
                name = f"bot-{os.getpid()}"
                self._lock_fd = _try_lock(self.directory / f"{name}.lock")
                self._own = SpoolFile(self.directory / f"{name}.sqlite3")
                self._pid = os.getpid()
                threading.Thread(target=self._drain_forever, name="relmon-spool", daemon=True).start()
            return self._own

    def add(self, entry: Entry) -> bool:
        """Keep an entry on disk (True); the first of an outage is logged as a warning, the others at debug level.
        Past RELMON_SPOOL_MAX_MB it is dropped (False; a Slack event still gets its 200, an exchange a 503): an
        error line, and once per filling `on_full` (a warning in the alert channel)."""
        spool = self._file()
        if spool.size() + len(json.dumps(entry)) > self.max_bytes:
            log.error(
                "event dropped: the spool is full (RELMON_SPOOL_MAX_MB)",
                extra={"event_id": entry_id(entry), "spool_bytes": spool.size()},
            )
            if not self._full:
                self._full = True
                self.on_full()
            return False
        first = spool.count() == 0
        spool.add(entry)
        metrics.event_spooled()
        say = log.warning if first else log.debug
        say("event spooled: Redis or the database is unavailable", extra={"event_id": entry_id(entry)})
        return True

    def holding(self) -> bool:
        """True while this process's spool is not empty: later events join the queue, so order holds. Asked for
        every event: the size kept in memory answers, not a query of the file."""
        return self._file().size() > 0

    def _drain_forever(self) -> None:
        stop = threading.Event()
        while not stop.wait(DRAIN_EVERY_SECONDS):
            try:
                self.drain_once()
            except Exception:  # the drainer must outlive any one failure
                log.exception("spool drain failed")

    def drain_once(self) -> int:
        own = self._file()
        done = own.drain(self.publish)
        if done and not own.count():
            self._full = False  # drained: a later filling warns again
        for lock in self.directory.glob("bot-*.lock"):
            if lock.stem == own.path.stem:
                continue
            fd = _try_lock(lock)
            if fd is None:
                continue  # a live process drains its own
            try:
                orphan = SpoolFile(lock.with_suffix(".sqlite3"))
                done += orphan.drain(self.publish)
                left = orphan.count()
                orphan.close()
                if not left:
                    for suffix in (".sqlite3", ".sqlite3-wal", ".sqlite3-shm", ".lock"):
                        with contextlib.suppress(FileNotFoundError):
                            lock.with_suffix(suffix).unlink()
            finally:
                os.close(fd)
        if done:
            log.info("spooled events handed on", extra={"count": done})
        return done
