"""What the bot does with an event before Slack gets its acknowledgement: deduplicate it and hand it on durably,
nothing more. One Redis round trip (a script) marks the event by its `event_id` and, when the mark is new, notes the
event in capture.handoffs; then the `capture_event` task is sent (workers.tasks.events), which reads the
conversation and pairs in a worker. Slack's retry of an event already handed on is dropped here; the note makes the
orphan check send a task message lost on the way again.

An outage (Redis or the broker down) spools the event on local disk (bot.spool) and Slack still gets its 200; the
spool hands it on the same way, in order, when they are back. An event spooled after its mark and note were written
(the broker down, Redis up) keeps its note's ID, and is only sent again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from bot.spool import OUTAGE_ERRORS, EventSpool
from capture import handoffs
from capture.events import REACTION_EVENTS
from capture.pairing import message_of
from common import task_names
from common.celery_app import celery
from common.telemetry.logs import event_fields

log = logging.getLogger("relmon.capture")

EVENT_DONE_TTL_SECONDS = 3600  # Slack's last retry comes about 5 minutes after the first delivery

# KEYS: the event's mark, the notes' hash, their times; ARGV: mark TTL, note ID, note JSON, now.
_MARK_AND_NOTE = """
if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2])
  return 1
end
return 0
"""


class EventHandOn:
    """Hands events on to the workers, through this process's spool while an outage lasts."""

    def __init__(
        self,
        client: redis.Redis,
        spool_directory: Path,
        *,
        max_bytes: int = 512 * 1024 * 1024,
        on_full: Callable[[], None] = lambda: None,
    ) -> None:
        self.redis = client
        self._mark_and_note = client.register_script(_MARK_AND_NOTE)
        self.spool = EventSpool(spool_directory, self.hand_on, max_bytes=max_bytes, on_full=on_full)

    def __call__(self, entry: dict[str, Any]) -> None:
        """An event as the listener received it ({"body": envelope, "own": relmon's identity}): handed on now, or
        spooled behind earlier ones or through an outage."""
        if self.spool.holding():  # earlier events wait on disk: this one queues behind them
            self.spool.add(entry)
            return
        try:
            self.hand_on(entry)
        except OUTAGE_ERRORS:
            self.spool.add(entry)

    def hand_on(self, entry: dict[str, Any]) -> None:
        """Mark, note and send one event (a duplicate stops at the mark). The note's ID is kept in `entry` once
        written, so that an entry spooled when the send failed is sent again, not taken for its own duplicate."""
        if "handoff" not in entry:
            handoff = handoffs.new_id()
            kwargs = {"task": task_names.CAPTURE_EVENT, "entry": entry, "handoff": handoff}
            event_id = entry["body"].get("event_id")
            if event_id:
                keys = [f"relmon:event:{event_id}", handoffs.KEY, handoffs.AT_KEY]
                note = json.dumps(kwargs, separators=(",", ":"))
                if not self._mark_and_note(keys=keys, args=[EVENT_DONE_TTL_SECONDS, handoff, note, time.time()]):
                    log.info("duplicate event ignored", extra={"event_id": event_id})
                    return
            else:  # no envelope ID to deduplicate by (not sent by Slack's Events API): noted all the same
                pipe = self.redis.pipeline(transaction=True)
                handoffs.note(pipe, handoff, kwargs, time.time())
                pipe.execute()
            entry["handoff"] = handoff
        sent = {key: value for key, value in entry.items() if key != "handoff"}
        kwargs = {"entry": sent, "handoff": entry["handoff"]}
        named = _named(entry)
        celery.send_task(task_names.CAPTURE_EVENT, kwargs=kwargs, **handoffs.shown(named))
        # The bot's one line per event: what it handed on, never what the event says (a worker logs the capture).
        where = event_fields(channel=named["channel"], message_ts=named["ts"])
        log.info(
            "event handed on", extra={**where, "event_id": entry["body"].get("event_id"), "handoff": named["handoff"]}
        )


def _named(entry: dict[str, Any]) -> dict[str, Any]:
    """What the task message's headers show of the event: where it is, never its words (Celery would repr the whole
    envelope into them, and log it at debug level)."""
    event = entry["body"].get("event") or {}
    where = event.get("item") if event.get("type") in REACTION_EVENTS else message_of(event)
    where = where if isinstance(where, dict) else {}
    return {"channel": event.get("channel") or where.get("channel"), "ts": where.get("ts"), "handoff": entry["handoff"]}


def warn_spool_full(slack, alert_channel: str | None) -> None:
    """Once per time the spool fills (RELMON_SPOOL_MAX_MB): a line in the alert channel, which Slack takes while
    Redis or the database is down. On a thread of its own: the listener acknowledges Slack at once."""

    def post() -> None:
        try:
            slack.chat_postMessage(
                channel=alert_channel,
                text=":warning: relmon's event spool is full (RELMON_SPOOL_MAX_MB): Redis or the database has been "
                "down long enough that new messages are no longer kept. Bring them back; raise the bound to keep more.",
            )
        except Exception:  # Slack unreachable too: the log line is the warning
            log.exception("spool full warning not posted")

    if alert_channel:
        threading.Thread(target=post, name="relmon-spool-full", daemon=True).start()
