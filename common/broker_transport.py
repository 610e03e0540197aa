"""kombu's Redis transport, with one synchronous Redis client per channel instead of one per command.

kombu builds a new `redis.Redis` for every publish, acknowledgement and unacked-set update
(`Channel.conn_or_acquire`), and a redis-py client's construction (its table of response callbacks) costs more
CPU than the command it then sends: about a third of a millisecond per answer across bot and workers. The client
kept here draws on the same connection pool as the ones kombu would build, and a redis-py client is thread-safe,
so nothing else changes. Celery picks it up through `broker_transport` (common.celery_app)."""

from __future__ import annotations

from functools import cached_property

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    def _create_client(self, asynchronous: bool = False):
        if asynchronous:  # the event loop's client: kombu already keeps one per channel
            return super()._create_client(asynchronous=True)
        return self._sync_client

    @cached_property
    def _sync_client(self):
        return super()._create_client()


class Transport(kombu_redis.Transport):
    Channel = Channel


TRANSPORT = f"{__name__}:Transport"
