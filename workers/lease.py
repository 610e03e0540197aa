"""Task leases: while a worker lives, it renews the lease on every task message it holds.

With late acknowledgement, kombu's Redis transport keeps each delivered message in the `unacked` hash and its
delivery time in the `unacked_index` sorted set; any worker puts back on the queue the messages whose score is
older than the visibility timeout. Left alone, that timeout must outlast every countdown a worker holds, which
makes a dead worker's tasks wait for it too. Here a thread in each worker moves the score of every message its
consumer holds (running, or waiting for a countdown or retry) to now, every sixth of the timeout: the timeout
becomes a short lease that lapses only when the worker stops renewing it, i.e. when it died.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Iterable

from celery import bootsteps

log = logging.getLogger("relmon.worker")

RENEWALS_PER_LEASE = 6


def renewal_interval(lease_seconds: float) -> float:
    """Seconds between renewals: several chances before the lease lapses, even on a busy machine."""
    return max(0.5, lease_seconds / RENEWALS_PER_LEASE)


def renew(client, index_key: str, tags: Iterable[str], now: float) -> int:
    """Move the delivery time of each held message to `now`; returns how many were renewed. `XX`: a message
    acknowledged (or restored elsewhere) meanwhile is not put back into the index."""
    scores = dict.fromkeys(tags, now)
    if not scores:
        return 0
    client.zadd(index_key, scores, xx=True, ch=False)
    return len(scores)


class LeaseRenewal(bootsteps.StartStopStep):
    """A consumer step: starts with the task consumer (again after each reconnection) and renews the leases of
    the messages held on every channel this worker has consumed from, the current one and any earlier one whose
    messages are still running."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent, **kwargs) -> None:
        super().__init__(parent, **kwargs)
        self._channels: weakref.WeakSet = weakref.WeakSet()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, consumer) -> None:
        channel = getattr(consumer.task_consumer, "channel", None)
        if channel is None or not hasattr(channel, "unacked_index_key"):
            return  # not the Redis transport: nothing to renew
        self._channels.add(channel)
        if self._thread is None or not self._thread.is_alive():
            lease = float(channel.visibility_timeout)
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, args=(renewal_interval(lease),), name="relmon-lease", daemon=True
            )
            self._thread.start()

    def shutdown(self, consumer) -> None:
        self._stop.set()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            for channel in list(self._channels):
                qos = getattr(channel, "_qos", None)
                if qos is None:
                    continue
                tags: list[str] = []
                with contextlib.suppress(RuntimeError):  # the dict changed while copied: next round
                    tags = list(qos._delivered)
                if not tags:
                    continue
                try:
                    with channel.conn_or_acquire() as client:
                        renew(client, channel.unacked_index_key, tags, time.time())
                except Exception as error:  # Redis away: the lease is several renewals long, try again
                    log.warning("could not renew task leases", extra={"error": repr(error)[:200], "held": len(tags)})
