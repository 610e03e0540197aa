"""Capture listener: every `message` event (all subtypes) in watched channels.

Human messages go to the conversation log (they are the questions). A monitored bot's message is logged and
handed to a worker (`capture_answer`, workers.tasks.answers), which upserts its answer (the run of bot messages it
belongs to) as a `settling` pair with a new version and enqueues `settle_pair`: the acknowledgement waits for Redis
only, never for the database. Edits bump the version (an answer edited after it was judged is judged again, at most
RELMON_MAX_REJUDGE times), a root re-sent for its reply bookkeeping does not; a deleted answer is marked deleted,
and a person's deleted message is blanked wherever a pair quotes it.

Retries: an event is marked done (by `event_id`, in Redis) only after capture succeeded, so Slack's retry
of a failed delivery is processed and a retry of a successful one is not. An outage (Redis or the broker
down) spools the event on local disk (bot.spool) and answers 200; the spool hands it on, in order, when
they are back. Other errors propagate: Bolt answers 500 and Slack retries. Replaying an event is harmless anyway
(the pair is unique per answer).
"""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import Any

from slack_bolt import App, BoltContext

from bot.listeners import reactions as outcomes
from bot.spool import OUTAGE_ERRORS, EventSpool
from capture import forget_notes, handoffs
from capture.conversation_log import ConversationLog, to_wire
from capture.directory import BotUsers
from capture.forgetting import removal_of_edit
from capture.pairing import (
    Author,
    Identity,
    LoggedMessage,
    author_of,
    channel_ignore_reason,
    is_bookkeeping,
    is_notice,
    is_tombstone,
    logged_message,
    message_of,
    replaces,
    unchanged,
)
from capture.text import message_text
from common import task_names
from common.celery_app import celery
from common.runtime import Runtime, get_runtime
from common.telemetry.logs import event_fields
from store.settings import Settings

log = logging.getLogger("relmon.capture")

EVENT_DONE_TTL_SECONDS = 3600  # Slack's last retry comes about 5 minutes after the first delivery


class Capture:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._bots: BotUsers | None = None
        self.reactions = outcomes.Reactions(settings)
        self.spool = EventSpool(
            settings.data_dir / "spool",
            self.capture_entry,
            max_bytes=int(settings.spool_max_mb * 1024 * 1024),
            on_full=self._warn_spool_full,
        )

    @property
    def runtime(self) -> Runtime:
        return get_runtime()

    def log(self) -> ConversationLog:
        return ConversationLog(self.runtime.redis, self.settings.question_ttl_seconds)

    def bots(self) -> BotUsers:
        """One per process: it keeps the learnt bot user IDs between events."""
        runtime = self.runtime
        if self._bots is None or self._bots.redis is not runtime.redis:
            self._bots = BotUsers(runtime.redis, runtime.slack, self.settings.monitored_bots)
        return self._bots

    # Entry point -----------------------------------------------------------------------------

    def on_event(self, body: dict[str, Any], context: BoltContext) -> None:
        """A message or reaction event: captured now, or spooled behind earlier ones or through an outage."""
        if channel_ignore_reason(event_channel(body), self.settings, self.runtime.rules):
            return  # unwatched, or relmon's own (the alert channel): nothing relmon will use, live or spooled
        own = {"user_id": context.bot_user_id, "bot_id": context.bot_id, "app_id": body.get("api_app_id")}
        entry = {"body": body, "own": own}
        if self.spool.holding():  # earlier events wait on disk: this one queues behind them
            self.spool.add(entry)
            return
        try:
            self.capture_entry(entry)
        except OUTAGE_ERRORS:
            self.spool.add(entry)

    def _warn_spool_full(self) -> None:
        """Once per time the spool fills: a line in the alert channel (Slack answers while Redis or the database
        is down). Its own thread: the listener acknowledges Slack at once."""

        def post() -> None:
            try:
                self.runtime.slack.chat_postMessage(
                    channel=self.settings.alert_channel,
                    text=":warning: relmon's event spool is full (RELMON_SPOOL_MAX_MB): Redis or the database has "
                    "been down long enough that new messages are no longer kept. Bring them back; raise the bound "
                    "to keep more.",
                )
            except Exception:  # Slack unreachable too: the log line is the warning
                log.exception("spool full warning not posted")

        if self.settings.alert_channel:
            threading.Thread(target=post, name="relmon-spool-full", daemon=True).start()

    def capture_entry(self, entry: dict[str, Any]) -> None:
        """Capture one event as the listener received it (live, or from the spool)."""
        body = entry["body"]
        if (body.get("event") or {}).get("type") in outcomes.REACTION_EVENTS:
            self.reactions.on_reaction(body, body["event"])
            return
        event_id = body.get("event_id")
        own = Identity(**entry["own"])
        shared = body.get("is_ext_shared_channel")
        self.handle(
            body.get("event") or {},
            body.get("team_id"),
            own,
            done_key=f"relmon:event:{event_id}" if event_id else None,
            ext_shared=shared if isinstance(shared, bool) else None,
        )

    def handle(
        self,
        event: dict[str, Any],
        team_id: str | None,
        own: Identity,
        done_key: str | None = None,
        ext_shared: bool | None = None,
    ) -> None:
        """Capture one message event. `done_key` marks the event captured (set only once capture succeeded), so
        that Slack's retry of a delivery that worked is skipped; `ext_shared` is the envelope's
        is_ext_shared_channel (None: ask Slack). Redis round trips are few and pipelined: every event waits for
        them before Slack gets its acknowledgement."""
        channel = event.get("channel")
        subtype = event.get("subtype")
        if channel_ignore_reason(channel, self.settings, self.runtime.rules):
            return
        if subtype == "message_deleted" or is_tombstone(event):
            if not self._already_done(done_key):
                self._deleted(channel, _as_deletion(event), own, team_id, ext_shared)
                self._mark_done(done_key)
            return
        message = message_of(event)
        if not message.get("ts") or is_notice(message) or is_bookkeeping(event):
            return  # a notice (or one edited), or a root re-sent for its reply count: nothing anyone said changed
        bots = self.bots()
        monitored = bots.knows(message)
        author = author_of(message, monitored, own)
        if author == Author.OWN:
            return
        if author == Author.MONITORED_BOT:
            bots.learn(message)
        conversation = self.log()
        existing, done = conversation.lookup(channel, message["ts"], done_key)
        if done:
            log.info("duplicate event ignored", extra={"event_id": done_key})
            return
        if existing is not None and existing.deleted:
            return  # a late edit of a deleted message
        if isinstance(event.get("root"), dict):  # thread_broadcast: the thread's root may be the question
            root = event["root"]
            if root.get("ts") and not is_notice(root) and conversation.get(channel, root["ts"]) is None:
                root_author = author_of(root, monitored, own)
                if root_author != Author.OWN:
                    conversation.record(channel, logged_message(root, root_author))
        # Other bots are logged without their words: they still separate one answer from the next.
        logged = logged_message(message, author, content={} if author == Author.OTHER else None, workspace=team_id)
        if not replaces(existing, logged) or (subtype == "message_changed" and unchanged(existing, logged)):
            self._mark_done(done_key)  # a stream's opener after its completion, or an edit that changed nothing
            return
        if subtype == "message_changed" and author in (Author.HUMAN, Author.MONITORED_BOT):
            self._edited(channel, event, existing, logged)
        if author != Author.MONITORED_BOT:
            done = (done_key, EVENT_DONE_TTL_SECONDS) if done_key is not None else None
            if author != Author.HUMAN:
                conversation.record(channel, logged, then_set=done)
                return
            # A person's message after a watched answer tells its outcome: a worker reads it from the log. The event
            # is marked done once the message is handed on (a spooled retry of a failed hand-on is not skipped).
            watching = outcomes.logged_watching(conversation, channel, logged, done)
            if watching is None:
                return  # no watch can concern it: logged and marked done in one round trip
            if watching:
                outcomes.hand_on_message(channel, logged.ts, watching)
            self._mark_done(done_key)
            return
        self._hand_on_answer(channel, logged, team_id, event.get("channel_type"), ext_shared)
        self._mark_done(done_key)

    def _already_done(self, done_key: str | None) -> bool:
        return done_key is not None and bool(self.runtime.redis.exists(done_key))

    def _mark_done(self, done_key: str | None) -> None:
        if done_key is not None:
            self.runtime.redis.set(done_key, "1", ex=EVENT_DONE_TTL_SECONDS, nx=True)

    # Answers -----------------------------------------------------------------------------------

    def _hand_on_answer(
        self,
        channel: str,
        message: LoggedMessage,
        team_id: str | None,
        channel_type: str | None,
        ext_shared: bool | None,
        *,
        record: bool = True,
    ) -> None:
        """Log `message` (unless `record` is off) and hand its answer to a worker (workers.tasks.answers), which
        stores it: no SQL before the acknowledgement. The handoff is noted in the log's round trip, before the
        task is sent, so that a task message lost on the way is sent again (capture.handoffs)."""
        handoff = handoffs.new_id()
        kwargs = {
            "channel": channel,
            "ts": message.ts,
            "thread_ts": message.thread_ts if message.in_thread else None,
            "team_id": team_id,
            "channel_type": channel_type,
            "ext_shared": ext_shared,
            "logged": to_wire(message),
            "handoff": handoff,
        }
        noting = partial(handoffs.note, handoff_id=handoff, kwargs=kwargs, now=time.time())
        if record:
            self.log().record(channel, message, also=noting)
        else:
            pipe = self.runtime.redis.pipeline(transaction=True)
            noting(pipe)
            pipe.execute()
        celery.send_task(task_names.CAPTURE_ANSWER, kwargs=kwargs, **handoffs.shown(kwargs))
        log.info("answer handed on", extra=event_fields(channel=channel, message_ts=message.ts))

    def _deleted(
        self, channel: str, event: dict[str, Any], own: Identity, team_id: str | None, ext_shared: bool | None
    ) -> None:
        ts = event.get("deleted_ts") or (event.get("previous_message") or {}).get("ts")
        if not ts:
            return
        conversation = self.log()
        previous = dict(event.get("previous_message") or {}, ts=ts)
        existing = conversation.get(channel, ts)
        author = existing.author if existing else author_of(previous, self.bots().knows(previous), own)
        if author in (Author.HUMAN, Author.MONITORED_BOT):  # what it said, for the worker that scrubs its copies
            said = [message_text(existing.content) if existing else "", message_text(previous)]
            self._note_forget(channel, ts, said, edited=False)
        tombstone = conversation.mark_deleted(channel, ts, fallback=logged_message(previous, author, content={}))
        if author == Author.MONITORED_BOT and tombstone is not None:
            self._hand_on_answer(channel, tombstone, team_id, event.get("channel_type"), ext_shared, record=False)
        if author in (Author.HUMAN, Author.MONITORED_BOT):
            # No copy keeps its words: a worker scrubs them (workers.tasks.forgetting.forget_message).
            thread = (tombstone.thread_key if tombstone else None) or previous.get("thread_ts") or ts
            celery.send_task(task_names.FORGET_MESSAGE, kwargs={"channel": channel, "ts": ts, "thread_ts": thread})

    def _edited(self, channel: str, event: dict[str, Any], existing: LoggedMessage | None, edit: LoggedMessage) -> None:
        """An edit that takes words out of a message: a worker scrubs those words from every copy (an edit that
        only adds, as a stream does, costs nothing more)."""
        before = message_text(existing.content) if existing else message_text(event.get("previous_message") or {})
        removal = removal_of_edit([before], message_text(edit.content))
        if removal:
            self._note_forget(channel, edit.ts, sorted(removal.words), edited=True)
            kwargs = {"channel": channel, "ts": edit.ts, "thread_ts": edit.thread_key, "edited": True}
            celery.send_task(task_names.FORGET_MESSAGE, kwargs=kwargs)

    def _note_forget(self, channel: str, ts: str, texts: list[str], *, edited: bool) -> None:
        pipe = self.runtime.redis.pipeline(transaction=False)
        forget_notes.keep(pipe, channel, ts, texts, edited=edited, ttl_seconds=self.settings.question_ttl_seconds)
        pipe.execute()


def _as_deletion(event: dict[str, Any]) -> dict[str, Any]:
    """A message_deleted, or a tombstone's message_changed, as the deletion of one message."""
    if event.get("subtype") == "message_deleted":
        return event
    inner = message_of(event)
    return dict(event, deleted_ts=inner.get("ts"), previous_message=event.get("previous_message") or inner)


def register(app: App, settings: Settings) -> None:
    capture = Capture(settings)
    for event_type in ("message", *outcomes.REACTION_EVENTS):  # one spool keeps them in order through an outage
        app.event(event_type)(capture.on_event)

    @app.event("app_mention")
    def _mention_is_seen_as_a_message_too() -> None:
        """A mention in a watched channel also arrives as a `message` event, which captures it."""


def event_channel(body: dict[str, Any]) -> str | None:
    """The channel an event is about: a message's, or the reacted message's."""
    event = body.get("event") or {}
    channel = event.get("channel")
    if channel is None and isinstance(event.get("item"), dict):
        channel = event["item"].get("channel")
    return channel if isinstance(channel, str) else None
