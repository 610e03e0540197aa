"""What a deleted or edited message said, kept in Redis from the bot's event until a worker has scrubbed every
copy of it (`workers.tasks.forgetting`), then dropped. The task's arguments carry IDs only (Celery keeps task
messages in Redis, and its append-only file keeps them after): the words travel here, under one key per message.

    relmon:forget:{channel}:{ts}          list of the texts a deleted message had (its log entry, previous_message)
    relmon:forget-edit:{channel}:{ts}     list of the words edits took out of it
"""

from __future__ import annotations

from typing import Any

import redis

# A backstop: the worker drops the note once it has scrubbed (within seconds); if it never runs, the note lapses
# with the conversation log it was copied from.
DEFAULT_TTL_SECONDS = 86_400


def _key(channel: str, ts: str, edited: bool) -> str:
    return f"relmon:forget{'-edit' if edited else ''}:{channel}:{ts}"


def keep(
    pipe: Any, channel: str, ts: str, texts: list[str], *, edited: bool = False, ttl_seconds: int = DEFAULT_TTL_SECONDS
) -> None:
    """Queue the note on a pipeline of the caller's."""
    texts = [text for text in texts if text and text.strip()]
    if texts:
        pipe.rpush(_key(channel, ts, edited), *texts)
        pipe.expire(_key(channel, ts, edited), int(ttl_seconds))


def read(client: redis.Redis, channel: str, ts: str, *, edited: bool = False) -> list[str]:
    raw = client.lrange(_key(channel, ts, edited), 0, -1)
    return [item.decode() if isinstance(item, bytes) else item for item in raw]


def drop(client: redis.Redis, channel: str, ts: str, count: int, *, edited: bool = False) -> None:
    """Drop the `count` texts read (a note added since stays for its own task; an emptied list is gone)."""
    if count:
        client.ltrim(_key(channel, ts, edited), count, -1)


def pending(client: redis.Redis, channel: str, timestamps: list[str]) -> bool:
    """Whether a deletion or an edit of one of these messages is still to be scrubbed: its note is kept from its
    event's capture until the scrub has committed."""
    keys = [_key(channel, ts, edited) for ts in timestamps if ts for edited in (False, True)]
    return bool(keys) and bool(client.exists(*keys))
