"""What waits in Redis for an ingested exchange not stored yet (its `ingest_exchange` may still be on its way, or
retrying through a database outage, when its signals or its deletion come):

    relmon:exchange-signals:{key}     list of the signals (JSON) the bot sent for it, applied once it is stored
    relmon:exchange-forgotten:{key}   the exchange was deleted (DELETE /v1/exchanges/{id}): a later store stores
                                      nothing, and a store that raced the deletion is scrubbed again

`key`: a hash of (bot, id), which may hold any characters. Each side writes its own note before it reads the
other's (a signal parks, then looks for the exchange; a store commits, then reads the signals and the deletion),
so whichever comes second sees the first.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import redis

SIGNALS_TTL_SECONDS = 7 * 86_400  # a signal whose exchange never came lapses
FORGOTTEN_TTL_SECONDS = 90 * 86_400  # a deletion outlives any resend of its exchange by the bot's retries


def _key(kind: str, bot: str, exchange_id: str) -> str:
    digest = hashlib.sha256(json.dumps([bot, exchange_id]).encode()).hexdigest()[:32]
    return f"relmon:exchange-{kind}:{digest}"


def park_signal(client: redis.Redis, bot: str, exchange_id: str, signal: dict[str, Any]) -> None:
    key = _key("signals", bot, exchange_id)
    pipe = client.pipeline(transaction=True)
    pipe.rpush(key, json.dumps(signal, sort_keys=True))
    pipe.expire(key, SIGNALS_TTL_SECONDS)
    pipe.execute()


def parked_signals(client: redis.Redis, bot: str, exchange_id: str) -> list[str]:
    """The signals waiting, in the order they came, as parked (JSON)."""
    raws = client.lrange(_key("signals", bot, exchange_id), 0, -1)
    return [raw.decode() if isinstance(raw, bytes) else raw for raw in raws]


def drop_signals(client: redis.Redis, bot: str, exchange_id: str, applied: list[str] | None = None) -> None:
    """Drop the signals applied (each once, by value: one parked since, or by a twin task, stays), or all."""
    key = _key("signals", bot, exchange_id)
    if applied is None:
        client.delete(key)
        return
    pipe = client.pipeline(transaction=True)
    for raw in applied:
        pipe.lrem(key, 1, raw)
    pipe.execute()


def note_forgotten(client: redis.Redis, bot: str, exchange_id: str) -> None:
    client.set(_key("forgotten", bot, exchange_id), "1", ex=FORGOTTEN_TTL_SECONDS)


def is_forgotten(client: redis.Redis, bot: str, exchange_id: str) -> bool:
    return bool(client.exists(_key("forgotten", bot, exchange_id)))
