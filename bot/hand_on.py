"""What the bot does with an event before Slack gets its acknowledgement: deduplicate it and hand it on durably,
nothing more. One Redis round trip (a script) marks the event by its `event_id` and, when the mark is new, notes the
event in capture.handoffs and pushes the `capture_event` task's message (common.task_message: Celery's own
message, which a worker takes like any other), so Redis is woken once per event. The task (workers.tasks.events)
reads the conversation and pairs in a worker. Slack's retry of an event already handed on is dropped here; the
note makes the orphan check send a task message lost on the way again. A person's new message (half of what Slack
sends) needs no worker unless a watch could concern it: the same script logs it in the conversation log, where a
worker's capture of the answer reads it, and sends nothing; that script reads no more than it writes.

An outage (Redis down) spools the event on local disk (bot.spool) and Slack still gets its 200; the spool hands it
on the same way, in order, when Redis is back. Should Celery's broker not be this Redis (the settings always make
it so; a test may point Celery elsewhere), the mark and note go first and the task is sent through Celery after
them: an event spooled after its mark and note were written (the broker down, Redis up) keeps its note's ID, and is
only sent again.
"""

from __future__ import annotations

import contextlib
import enum
import json
import logging
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

import redis

from bot.spool import OUTAGE_ERRORS, EventSpool
from capture import handoffs
from capture.conversation_log import ConversationLog
from capture.directory import BotUsers
from capture.events import REACTION_EVENTS, new_person_message
from capture.outcome_watches import WatchBoard
from capture.pairing import Author, Identity, logged_message, message_of
from common import task_names
from common.celery_app import celery
from common.task_message import task_message
from common.telemetry.logs import event_fields

log = logging.getLogger("relmon.capture")

EVENT_DONE_TTL_SECONDS = 3600  # Slack's last retry comes about 5 minutes after the first delivery

# KEYS: the event's mark, the notes' hash, their times, the task's queue; ARGV: the mark's TTL (0: no mark, the
# event has no ID), note ID, note JSON, now, the task message ('': none, Celery sends it).
# For a person's new message (capture.events.new_person_message) also KEYS: its key in the conversation log, the
# watches it could concern, the learnt bot users; ARGV: its writer, the log's commands (JSON). It is logged here,
# and no task sent, unless something is logged under its ts already (an edit or deletion came first), a watch
# could concern it (an outcome: workers.outcome_watching) or its writer is a bot's user: a worker's capture
# decides those. Atomic: a worker putting a watch up after this finds the message in the log.
_HAND_ON = """
if ARGV[1] ~= '0' and not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  return 0
end
if ARGV[7] and redis.call('EXISTS', KEYS[5]) == 0 and redis.call('HLEN', KEYS[6]) == 0 then
  local bot = false
  for _, user in ipairs(redis.call('HVALS', KEYS[7])) do
    if user == ARGV[6] then bot = true end
  end
  if not bot then
    for _, command in ipairs(cjson.decode(ARGV[7])) do
      redis.call(unpack(command))
    end
    return 2
  end
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2])
if ARGV[5] ~= '' then
  redis.call('LPUSH', KEYS[4], ARGV[5])
end
return 1
"""


class HandedOn(enum.Enum):
    """What the hand-on did with an event."""

    DUPLICATE = 0  # Slack's retry of an event already handed on: nothing
    SENT = 1  # noted, and its `capture_event` task sent
    LOGGED = 2  # a person's new message, logged in the conversation log: no worker needed


class EventHandOn:
    """Hands events on to the workers, through this process's spool while an outage lasts. `broker_url`: Celery's
    broker URL for the server `client` talks to (common.celery_app.broker_url_for). With a `conversation_log` a
    person's new message is logged in the hand-on's round trip (`monitored`: RELMON_MONITORED_BOTS)."""

    def __init__(
        self,
        client: redis.Redis,
        spool_directory: Path,
        *,
        broker_url: str,
        max_bytes: int = 512 * 1024 * 1024,
        on_full: Callable[[], None] = lambda: None,
        conversation_log: ConversationLog | None = None,
        monitored: Collection[str] = (),
    ) -> None:
        self.redis, self.broker_url = client, broker_url
        self.conversation_log, self.monitored = conversation_log, frozenset(monitored)
        self.watches = WatchBoard(client)
        self._hand_on = client.register_script(_HAND_ON)
        self.spool = EventSpool(spool_directory, self.hand_on, max_bytes=max_bytes, on_full=on_full)

    def prepare(self) -> None:
        """What the first event would otherwise do while Slack waits, done once per process before it serves: open
        this process's spool, and load the script into Redis (while Redis is out of reach the first event does)."""
        self.spool.holding()
        with contextlib.suppress(*OUTAGE_ERRORS):
            self.redis.script_load(_HAND_ON)

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

    def hand_on(self, entry: dict[str, Any]) -> HandedOn:
        """Mark, note and send one event (a duplicate stops at the mark; a person's new message is only logged)."""
        handed, kwargs = self.send(entry)
        if handed is HandedOn.DUPLICATE:
            log.info("duplicate event ignored", extra={"event_id": entry["body"].get("event_id")})
            return handed
        # The bot's one line per event: what it did, never what the event says (a worker logs the capture).
        named = _named(entry, kwargs["handoff"] if handed is HandedOn.SENT else None)
        where = event_fields(channel=named["channel"], message_ts=named["ts"])
        event_id = entry["body"].get("event_id")
        if handed is HandedOn.LOGGED:
            log.info("message logged", extra={**where, "event_id": event_id})
        else:
            log.info("event handed on", extra={**where, "event_id": event_id, "handoff": named["handoff"]})
        return handed

    def send(self, entry: dict[str, Any]) -> tuple[HandedOn, dict[str, Any]]:
        """What became of the event, and the `capture_event` task's keyword arguments. An entry that carries a
        note's ID (`handoff`) was marked and noted already, and is only sent."""
        if celery.conf.broker_url != self.broker_url:
            return self._send_through_celery(entry)
        handoff = entry.get("handoff") or handoffs.new_id()
        kwargs, named = _task_arguments(entry, handoff)
        queue, message = task_message(celery, task_names.CAPTURE_EVENT, kwargs, kwargsrepr=repr(named))
        if "handoff" in entry:
            self.redis.lpush(queue, message)
            return HandedOn.SENT, kwargs
        return self._mark_and_note(entry, handoff, kwargs, queue, message), kwargs

    def _send_through_celery(self, entry: dict[str, Any]) -> tuple[HandedOn, dict[str, Any]]:
        """Celery's broker is not this Redis: the mark and note first, then the task through Celery. The note's ID
        is kept in `entry` once written, so that an entry spooled when the send failed is sent again, not taken for
        its own duplicate."""
        if "handoff" not in entry:
            handoff = handoffs.new_id()
            kwargs, _ = _task_arguments(entry, handoff)
            handed = self._mark_and_note(entry, handoff, kwargs, handoffs.KEY, "", person=False)
            if handed is HandedOn.DUPLICATE:
                return handed, kwargs
            entry["handoff"] = handoff
        kwargs, named = _task_arguments(entry, entry["handoff"])
        celery.send_task(task_names.CAPTURE_EVENT, kwargs=kwargs, **handoffs.shown(named))
        return HandedOn.SENT, kwargs

    def _mark_and_note(
        self, entry: dict[str, Any], handoff: str, kwargs: dict, queue: str, message: str, *, person: bool = True
    ) -> HandedOn:
        """The script. An event without an ID (not sent by Slack's Events API) has nothing to deduplicate by: it is
        noted all the same."""
        event_id = entry["body"].get("event_id")
        note = json.dumps({"task": task_names.CAPTURE_EVENT, **kwargs}, separators=(",", ":"))
        keys = [f"relmon:event:{event_id}" if event_id else handoffs.KEY, handoffs.KEY, handoffs.AT_KEY, queue]
        args: list[Any] = [EVENT_DONE_TTL_SECONDS if event_id else 0, handoff, note, time.time(), message]
        if person:
            self._add_person_message(entry, keys, args)
        return HandedOn(self._hand_on(keys=keys, args=args))

    def _add_person_message(self, entry: dict[str, Any], keys: list[str], args: list[Any]) -> None:
        """The script's keys and arguments that log a person's new message (when the event is one)."""
        if self.conversation_log is None:
            return
        event = entry["body"].get("event") or {}
        message = new_person_message(event, self.monitored, Identity(**entry["own"]))
        if message is None:
            return
        logged = logged_message(message, Author.HUMAN, workspace=entry["body"].get("team_id"))
        channel = event["channel"]
        watches = self.watches.candidates_key(channel, logged)
        keys += [self.conversation_log.msg_key(channel, logged.ts), watches, BotUsers.KEY]
        commands = self.conversation_log.record_commands(channel, logged)
        args += [logged.user, json.dumps(commands, separators=(",", ":"))]


def _task_arguments(entry: dict[str, Any], handoff: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The task's keyword arguments (the entry as the listener received it, and the note's ID), and what its
    message's headers show of them."""
    sent = {key: value for key, value in entry.items() if key != "handoff"}
    return {"entry": sent, "handoff": handoff}, _named(entry, handoff)


def _named(entry: dict[str, Any], handoff: str | None) -> dict[str, Any]:
    """What the task message's headers show of the event: where it is, never its words (Celery would repr the whole
    envelope into them, and log it at debug level)."""
    event = entry["body"].get("event") or {}
    where = event.get("item") if event.get("type") in REACTION_EVENTS else message_of(event)
    where = where if isinstance(where, dict) else {}
    return {"channel": event.get("channel") or where.get("channel"), "ts": where.get("ts"), "handoff": handoff}


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
