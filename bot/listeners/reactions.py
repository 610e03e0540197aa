"""Outcome observation in the bot: people's messages after a watched answer and reactions on it are handed to
the workers by task name (IDs only), after one Redis read of the watches the message could concern. The rules are in
capture.outcomes; the workers record the signals (workers.tasks.outcomes).

Reactions are acknowledged as fast as messages and deduplicated the same way: by `event_id`, marked done once
the task was sent, so Slack's retry of a failed delivery is handed on and a retry of a successful one is not.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from capture.conversation_log import ConversationLog
from capture.outcome_watches import WatchBoard, decoded_watches
from capture.outcomes import watching
from capture.pairing import LoggedMessage, channel_ignore_reason
from common import task_names
from common.celery_app import celery
from common.runtime import get_runtime
from common.telemetry.logs import event_fields
from store.settings import Settings

log = logging.getLogger("relmon.capture")

EVENT_DONE_TTL_SECONDS = 3600  # as the capture listener's
# Registered by the capture listener, whose spool keeps them through an outage, in order with messages.
REACTION_EVENTS = ("reaction_added", "reaction_removed")


def board() -> WatchBoard:
    return WatchBoard(get_runtime().redis)


def logged_watching(
    log: ConversationLog, channel: str, message: LoggedMessage, done: tuple[str, int] | None
) -> list[int] | None:
    """Log a person's message and read the open watches it concerns, in one transaction (the rule:
    capture.outcomes.watching). In this order: a worker opening a window puts its watch up before it reads the
    log, so it finds this message there, or this read finds its watch. None when no watch can concern it: then
    `done` (key, seconds), the event's mark, was set in the same transaction; otherwise the caller sets it once
    the message is handed on."""
    reads = board().read_candidates(channel, message)
    if reads is None:
        log.record(channel, message, then_set=done)
        return None
    replies = log.record(channel, message, also=reads)
    return watching(decoded_watches(replies[0]), message, time.time())


def hand_on_message(channel: str, ts: str, pair_ids: list[int]) -> None:
    """One task for the message, whatever the number of pairs it concerns: the worker reads it once."""
    if pair_ids:
        celery.send_task(task_names.OBSERVE_MESSAGE, args=[pair_ids, channel, ts])


class Reactions:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def on_reaction(self, body: dict[str, Any], event: dict[str, Any]) -> None:
        item = event.get("item") or {}
        channel, ts, emoji, user = item.get("channel"), item.get("ts"), event.get("reaction"), event.get("user")
        if item.get("type") != "message" or not (channel and ts and emoji and user):
            return
        if channel_ignore_reason(channel, self.settings, get_runtime().rules):
            return
        redis = get_runtime().redis
        event_id = body.get("event_id")
        done_key = f"relmon:event:{event_id}" if event_id else None
        if done_key is not None and redis.exists(done_key):
            log.info("duplicate event ignored", extra={"event_id": done_key})
            return
        watch = board().of_answer(channel, ts)
        if watch is not None:
            added = event.get("type") == "reaction_added"
            at = _seconds(event.get("event_ts")) or time.time()
            celery.send_task(task_names.OBSERVE_REACTION, args=[watch.pair_id, user, emoji, added, at])
            log.info("reaction handed on", extra=event_fields(channel=channel, message_ts=ts, pair_id=watch.pair_id))
        if done_key is not None:
            redis.set(done_key, "1", ex=EVENT_DONE_TTL_SECONDS, nx=True)


def _seconds(ts: Any) -> float | None:
    try:
        return float(ts)
    except (TypeError, ValueError):
        return None
