"""Task leases: while a worker lives, it renews the lease on every task message it holds.

With late acknowledgement, kombu's Redis transport keeps each delivered message in the `unacked` hash and its
delivery time in the `unacked_index` sorted set; any worker puts back on the queue the messages whose score is
older than the visibility timeout. Left alone, that timeout must outlast every countdown a worker holds, which
makes a dead worker's tasks wait for it too. Here a thread in each worker moves the score of every message its
consumer holds (running, or waiting for a countdown or retry) to now, every sixth of the timeout: the timeout
becomes a short lease that lapses only when the worker stops renewing it, i.e. when it died.

When the connection to Redis is lost, Celery drops what the old channel's consumer held but did not run
(countdowns, prefetched messages) and reconnects on a new channel. Of the old channel only the tasks still running
keep their lease: the rest lapse and come back once Redis does, as a dead worker's would. Renewing them all would
strand them in `unacked` for as long as the worker lives.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable

import redis
from celery import bootsteps
from celery.worker import state

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


def leased_tags(held: Iterable[str], *, current: bool, running: set[str]) -> list[str]:
    """The delivery tags of one channel whose lease is renewed: all it holds on the consumer's current channel;
    on an earlier one (before a reconnection), only those of tasks still running."""
    return list(held) if current else [tag for tag in held if tag in running]


def running_tags() -> set[str]:
    """Delivery tags of the tasks this worker is running now."""
    tags: set[str] = set()
    with contextlib.suppress(RuntimeError):  # the set changed while copied: next round
        for request in list(state.active_requests):
            tag = getattr(getattr(request, "message", None), "delivery_tag", None)
            if tag is not None:
                tags.add(tag)
    return tags


def route_after_close(channel, live: Callable[[], object | None]) -> None:
    """After a lost connection Celery lets go of the old channel's connection, and kombu built every client for it
    from that connection: acknowledging a task that was still running, or restoring the held messages on close,
    raised AttributeError, which stopped the worker ("Unrecoverable error"). Here the closed channel's commands go
    through the `live` (current) channel's connection, to the same Redis and keys; with none yet, they fail as a
    lost connection does, which Celery and kombu shrug off (the messages' leases lapse and a live worker restores
    them)."""
    create: Callable = channel._create_client

    def create_client(asynchronous: bool = False):
        transport = channel.connection
        if transport is not None and getattr(transport, "client", None) is not None:
            return create(asynchronous=asynchronous)
        current = live()
        if current is None or current is channel or current.closed:
            raise redis.exceptions.ConnectionError("the connection to the broker was lost")
        return current._create_client(asynchronous=asynchronous)

    channel._create_client = create_client


class LeaseRenewal(bootsteps.StartStopStep):
    """A consumer step: starts with the task consumer (again after each reconnection) and renews the leases of
    the messages held on every channel this worker has consumed from: all of the current one's, and an earlier
    one's still running."""

    requires = {"celery.worker.consumer.tasks:Tasks"}

    def __init__(self, parent, **kwargs) -> None:
        super().__init__(parent, **kwargs)
        self._channels: weakref.WeakSet = weakref.WeakSet()
        self._current: weakref.ref | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, consumer) -> None:
        channel = getattr(consumer.task_consumer, "channel", None)
        if channel is None or not hasattr(channel, "unacked_index_key"):
            return  # not the Redis transport: nothing to renew
        route_after_close(channel, self._live)
        self._channels.add(channel)
        self._current = weakref.ref(channel)
        if self._thread is None or not self._thread.is_alive():
            lease = float(channel.visibility_timeout)
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, args=(renewal_interval(lease),), name="relmon-lease", daemon=True
            )
            self._thread.start()

    def _live(self):
        return self._current() if self._current is not None else None

    def shutdown(self, consumer) -> None:
        self._stop.set()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            running = running_tags()
            current = self._live()
            for channel in list(self._channels):
                qos = getattr(channel, "_qos", None)
                if qos is None:
                    continue
                held: list[str] = []
                with contextlib.suppress(RuntimeError):  # the dict changed while copied: next round
                    held = list(qos._delivered)
                is_current = channel is current and not channel.closed
                tags = leased_tags(held, current=is_current, running=running)
                if not tags:
                    if not is_current:
                        self._channels.discard(channel)  # nothing of it runs any more
                    continue
                try:
                    with channel.conn_or_acquire() as client:  # a closed channel's goes through the current one
                        renew(client, channel.unacked_index_key, tags, time.time())
                except Exception as error:  # Redis away: the lease is several renewals long, try again
                    log.warning("could not renew task leases", extra={"error": repr(error)[:200], "held": len(tags)})
