"""What the capture listener does with an event before Slack gets its acknowledgement: deduplicate it, note it and
publish its `capture_event` task through Celery, nothing more. Everything else (reading the conversation, logging a
person's message, pairing) is the task's, in a worker (workers.tasks.events).

Two steps:
1. the event's mark (`SET NX` on its `event_id`, an hour): Slack's retry of an event already handed on stops here.
   Recorded in the entry once done, so that an entry spooled after it (Redis up, the broker down) is not taken for
   its own duplicate when the spool hands it on;
2. the task sent the one way noted work is sent (common.task_notes): noted, so that a message lost on its way is
   sent again by the orphan check, then published with Celery's `send_task`, whatever the broker.

An outage (Redis or the broker down) spools the entry on local disk (bot.spool) and Slack still gets its 200; the
spool hands it on the same way, in order, when they are back.

The ingest API's exchanges (bot.ingest's batches, bot.otlp_ingest's traces) take the same way through the same
spool, a request's exchanges as one entry of their own kind (`exchanges_entry`): one spool row, and once Redis is up
one transaction noting a few `ingest_exchanges` calls of up to EXCHANGES_PER_TASK exchanges each, then their
publishes. No mark: the worker's store is idempotent per bot and exchange id (an id twice in one request is handed on
once, the first; a request sent again is the same calls, the same notes). Its signals and deletions are `task`
entries: the task's call, noted and sent as it is.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from bot.spool import OUTAGE_ERRORS, EventSpool
from capture.events import REACTION_EVENTS
from capture.pairing import message_of
from common import task_names, task_notes
from common.telemetry.logs import event_fields

log = logging.getLogger("relmon.capture")

EVENT_DONE_TTL_SECONDS = 3600  # Slack's last retry comes about 5 minutes after the first delivery

Entry = dict[str, Any]  # {"body": the envelope, "own": relmon's identity}, and "marked" once its mark is set
EXCHANGES = "exchanges"  # an entry's "kind": a request's exchanges ({"kind": "exchanges", "exchanges": [...]})
EXCHANGE = "exchange"  # one exchange ({"kind": "exchange", "exchange": ...}), as a spool written before batches holds
TASK = "task"  # an entry's "kind": a task call of the ingest API (a signal, a deletion): {"task", "kwargs", "named"}
# A worker stores a task's exchanges one after the other: a batch of 512 spans is a few tasks that several worker
# threads share. As many as one POST /v1/exchanges batch may hold, so that such a batch is always one task.
EXCHANGES_PER_TASK = 100


class Published(enum.Enum):
    """What became of an event."""

    DUPLICATE = "duplicate"  # Slack's retry of an event already handed on: nothing
    SENT = "sent"  # noted, and its `capture_event` task published


class EventPublisher:
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
        self.spool = EventSpool(spool_directory, self.publish, max_bytes=max_bytes, on_full=on_full)

    def prepare(self) -> None:
        """Open this process's spool (and start its drainer) before the first event: a process that died with
        events on disk has them handed on by the next one, event or not."""
        self.spool.holding()

    def __call__(self, entry: Entry) -> bool:
        """An event as the listener received it (or an exchange): handed on now, or spooled behind earlier ones or
        through an outage. False: neither (the spool is full), so nothing keeps it."""
        if self.spool.holding():  # earlier events wait on disk: this one queues behind them
            return self.spool.add(entry)
        try:
            self.publish(entry)
        except OUTAGE_ERRORS:
            return self.spool.add(entry)
        return True

    def publish(self, entry: Entry) -> Published:
        """Mark, note and send one event; the steps already done (recorded in `entry`) are not done again. An
        exchange is noted and sent."""
        if entry.get("kind") == EXCHANGES:
            return publish_exchanges(self.redis, entry["exchanges"])
        if entry.get("kind") == EXCHANGE:
            return publish_exchanges(self.redis, [entry["exchange"]])
        if entry.get("kind") == TASK:
            return publish_task(self.redis, entry)
        event_id = entry["body"].get("event_id")
        if event_id and not entry.get("marked"):
            if not self.redis.set(f"relmon:event:{event_id}", "1", nx=True, ex=EVENT_DONE_TTL_SECONDS):
                log.info("duplicate event ignored", extra={"event_id": event_id})
                return Published.DUPLICATE
            entry["marked"] = True
        where = place_of(entry)
        # The headers' reprs name the event, never its words (Celery would repr the whole envelope into them, and
        # log it at debug level).
        task_id = task_notes.send(self.redis, event_call(entry), time.time(), argsrepr="()", kwargsrepr=repr(where))
        # The bot's one line per event: what it did, never what the event says (a worker logs the capture).
        fields = event_fields(channel=where["channel"], message_ts=where["ts"])
        log.info("event handed on", extra={**fields, "event_id": event_id, "task_id": task_id})
        return Published.SENT


def event_call(entry: Entry) -> task_notes.Call:
    """`capture_event`'s call: the event as the listener received it."""
    return task_notes.Call(task_names.CAPTURE_EVENT, kwargs={"entry": {"body": entry["body"], "own": entry["own"]}})


def exchanges_entry(exchanges: list[dict[str, Any]]) -> Entry:
    """A request's exchanges from the ingest API (common.exchanges.Exchange.to_task) as one spool entry."""
    return {"kind": EXCHANGES, "exchanges": exchanges}


def distinct(exchanges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The exchanges less those whose bot and id came earlier in the list: the store keeps the first one anyway."""
    seen: set[tuple[Any, Any]] = set()
    kept = []
    for exchange in exchanges:
        key = (exchange.get("bot"), exchange.get("id"))
        if key not in seen:
            seen.add(key)
            kept.append(exchange)
    return kept


def exchange_calls(exchanges: list[dict[str, Any]], per_task: int = EXCHANGES_PER_TASK) -> list[task_notes.Call]:
    """The `ingest_exchanges` calls that carry the exchanges, in order, up to `per_task` each. The same exchanges
    make the same calls (the same notes), so a request sent again adds no note."""
    kept = distinct(exchanges)
    return [
        task_notes.Call(task_names.INGEST_EXCHANGES, kwargs={"exchanges": kept[start : start + per_task]})
        for start in range(0, len(kept), per_task)
    ]


def publish_exchanges(client: redis.Redis, exchanges: list[dict[str, Any]]) -> Published:
    """Note every call of the exchanges in one transaction, then send each; the headers' reprs name them (bots,
    count, first and last ids), never their words."""
    calls = exchange_calls(exchanges)
    named = [named_by(call.kwargs["exchanges"]) for call in calls]
    options = [{"argsrepr": "()", "kwargsrepr": repr(names)} for names in named]
    task_ids = task_notes.send_all(client, calls, time.time(), options)
    for names, task_id in zip(named, task_ids, strict=True):
        log.info("exchanges handed on", extra={**names, "task_id": task_id})
    return Published.SENT


def named_by(exchanges: list[dict[str, Any]]) -> dict[str, Any]:
    """What a call's headers and log line say of its exchanges: ids, never words."""
    return {
        "bots": sorted({str(exchange.get("bot")) for exchange in exchanges}),
        "count": len(exchanges),
        "first_id": exchanges[0].get("id"),
        "last_id": exchanges[-1].get("id"),
    }


def task_entry(task: str, kwargs: dict[str, Any], named: dict[str, Any]) -> Entry:
    """A task call of the ingest API (a signal, a deletion) as a spool entry; `named`: what its headers and log line
    say of it (ids, never words)."""
    return {"kind": TASK, "task": task, "kwargs": kwargs, "named": named}


def publish_task(client: redis.Redis, entry: Entry) -> Published:
    """Note and send one such call; the headers' reprs name it, never its words (a handoff's reply)."""
    named = entry.get("named") or {}
    call = task_notes.Call(entry["task"], kwargs=entry["kwargs"])
    task_id = task_notes.send(client, call, time.time(), argsrepr="()", kwargsrepr=repr(named))
    log.info("ingest call handed on", extra={**named, "task": entry["task"], "task_id": task_id})
    return Published.SENT


def place_of(entry: Entry) -> dict[str, Any]:
    """Where the event is: its channel and message ts."""
    event = entry["body"].get("event") or {}
    where = event.get("item") if event.get("type") in REACTION_EVENTS else message_of(event)
    where = where if isinstance(where, dict) else {}
    return {"channel": event.get("channel") or where.get("channel"), "ts": where.get("ts")}


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
