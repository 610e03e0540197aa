"""The expected answer typed in the "Add to test set" modal, on its way from the bot to the worker that saves it.

Task arguments carry IDs only: a Celery message sits on the broker, is copied into its unacked hash and into
the task notes (common.task_notes), and shows in worker logs and Flower, none of which forgetting or retention
reaches. So the bot keeps the typed text in a Redis note of its own under a random key that expires
(`NOTE_TTL_SECONDS`), and the task (workers.tasks.golden.save_from_modal) gets the key. The worker reads the note,
saves, then swaps the note for a small "saved" mark holding the item's id only: a redelivered task (acks late)
finds the mark and says "saved" again instead of "expired". A note that expired unread saves nothing.
"""

from __future__ import annotations

import re
import secrets

import redis

NOTE_TTL_SECONDS = 24 * 3600  # a worker outage of a day is long; past it, the person is asked to write it again
_PREFIX = "relmon:golden:note:"
_SAVED_PREFIX = "relmon:golden:saved:"
_KEY_SHAPE = re.compile(r"[A-Za-z0-9_-]{22}")  # secrets.token_urlsafe(16)


def note_key(key: str) -> str:
    return _PREFIX + key


def saved_key(key: str) -> str:
    return _SAVED_PREFIX + key


def is_note_key(value: object) -> bool:
    """A key this module made (an older task's typed text in its place is not one: it is never looked up)."""
    return isinstance(value, str) and _KEY_SHAPE.fullmatch(value) is not None


def put(client: redis.Redis, text: str) -> str:
    """Keep the typed text for a day; returns the key to hand the task."""
    key = secrets.token_urlsafe(16)
    client.set(note_key(key), text.encode("utf-8"), ex=NOTE_TTL_SECONDS)
    return key


def read(client: redis.Redis, key: str) -> str | None:
    """The typed text, or None when the note is gone (expired, or saved already: see `saved_item`)."""
    if not is_note_key(key):
        return None
    raw = client.get(note_key(key))
    return None if raw is None else raw.decode("utf-8")


def saved_item(client: redis.Redis, key: str) -> int | None:
    """The item a note was saved in, when its task ran to the end before (a redelivery)."""
    raw = client.get(saved_key(key)) if is_note_key(key) else None
    return int(raw) if raw is not None else None


def mark_saved(client: redis.Redis, key: str, item_id: int) -> None:
    """The text is in the database now: the note goes, a mark with the item's id (no text) stays as long."""
    with client.pipeline() as pipe:
        pipe.delete(note_key(key)).set(saved_key(key), str(item_id), ex=NOTE_TTL_SECONDS)
        pipe.execute()


def drop(client: redis.Redis, key: str | None) -> None:
    """The note is not to be saved (refused, removed instead, the judgment gone): its text goes now."""
    if is_note_key(key):
        client.delete(note_key(str(key)))
