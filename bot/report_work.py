"""Bounded report work in the bot. App Home's view is built on one thread of its own, never on Bolt's listener
threads (which acknowledge events and commands): a person opening the tab again and again queues at most one
build, and a full queue drops the ask (the view shown stays). Builds are served from a view cached per period and
viewer class (`bot.listeners.home`), and each person may ask for RELMON_REPORTS_PER_PERSON_MINUTE reports a
minute (`bot.on_demand_limits.take_report`)."""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable

log = logging.getLogger("relmon.home")

MAX_QUEUED = 32  # builds waiting at most: past it an ask is dropped (the person's tab keeps what it shows)


class ReportWorker:
    """One thread that runs report builds, at most one queued per key (a person)."""

    def __init__(self, max_queued: int = MAX_QUEUED) -> None:
        self._queue: queue.Queue[tuple[str, Callable[[], None]]] = queue.Queue(maxsize=max_queued)
        self._queued: set[str] = set()
        self._guard = threading.Lock()
        self._pid: int | None = None

    def submit(self, key: str, build: Callable[[], None]) -> bool:
        """Queue `build` unless one for `key` is already waiting or the queue is full; False when dropped."""
        self._start()
        with self._guard:
            if key in self._queued:
                return False
            try:
                self._queue.put_nowait((key, build))
            except queue.Full:
                log.warning("report build dropped: the queue is full", extra={"queued": self._queue.qsize()})
                return False
            self._queued.add(key)
        return True

    def _start(self) -> None:
        """The thread, started on first use in each process (after gunicorn's fork)."""
        with self._guard:
            if self._pid != os.getpid():
                self._pid = os.getpid()
                threading.Thread(target=self._run, name="relmon-reports", daemon=True).start()

    def _run(self) -> None:
        while True:
            key, build = self._queue.get()
            with self._guard:
                self._queued.discard(key)
            try:
                build()
            except Exception:  # one failed build must not stop the others
                log.exception("report build failed")
