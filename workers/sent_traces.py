"""Where a verdict went: the trace ID (and the span ID the bot named) each judgment's verdict was sent on, kept in
Redis for as long as relmon keeps the judgment (RELMON_RETENTION_DAYS), so that forgetting a message reaches the
scores and annotations relmon sent about it (`workers.trace_forgetting`) even when the answer that named the trace
is the message deleted: its metadata can no longer be read then. IDs only, never a text.

    relmon:trace-sent:{judgment key}     JSON [trace_id, span_id or null]
"""

from __future__ import annotations

import json
import logging

import redis

log = logging.getLogger("relmon.traces")
DAY_SECONDS = 86_400


def _key(subject_key: str) -> str:
    return f"relmon:trace-sent:{subject_key}"


def remember(client: redis.Redis, subject_key: str, trace_id: str, span_id: str | None, *, days: int) -> None:
    """Keep where the verdict is sent. Never raises: a record not kept only means a later forget resolves the
    trace again (from the message's metadata, or its ts)."""
    try:
        client.set(_key(subject_key), json.dumps([trace_id, span_id]), ex=max(1, days) * DAY_SECONDS)
    except redis.RedisError as error:
        log.warning("trace not recorded", extra={"subject": subject_key, "error": type(error).__name__})


def recall(client: redis.Redis, subject_key: str) -> tuple[str, str | None] | None:
    """The trace and span the verdict was sent on, or None (never sent, expired, unreadable, or Redis failing: the
    caller resolves the trace again)."""
    try:
        raw = client.get(_key(subject_key))
    except redis.RedisError as error:
        log.warning("trace record not read", extra={"subject": subject_key, "error": type(error).__name__})
        return None
    if raw is None:
        return None
    try:
        trace_id, span_id = json.loads(raw)
    except (ValueError, TypeError):
        return None
    return (trace_id, span_id) if isinstance(trace_id, str) else None
