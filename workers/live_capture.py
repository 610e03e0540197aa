"""The capture of one live Slack event, in a worker (`capture_event`, workers.tasks.events): the bot only dropped
what nothing is captured of (capture.events), deduplicated it and published it (bot.publishing), so every read and
write of the conversation log happens here, after Slack had its acknowledgement: this task is the log's one writer.

Every `message` event (all subtypes) and reaction in watched channels. People's messages go to the conversation
log (they are the questions); a person's message after a watched answer, and a reaction on one, is handed on to
the outcome tasks (workers.tasks.outcomes) after one read of the watches it could concern. A monitored bot's message
is logged and its answer (the run of bot messages it belongs to) stored at once (workers.pairs.capturing, as
`capture_answer` does) as a `settling` pair with a new version, and `settle_pair` enqueued. Edits bump the version (an
answer edited after it was judged is judged again, at most RELMON_MAX_REJUDGE times), a root re-sent for its reply
bookkeeping does not; a deleted answer is marked deleted, and a person's deleted message is blanked wherever a
pair quotes it. Running an event twice (a retried task) changes nothing more: the pair is unique per answer.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from capture import forget_notes
from capture.conversation_log import ConversationLog, to_wire
from capture.events import REACTION_EVENTS, ignored
from capture.forgetting import removal_of_edit
from capture.notices import is_notice
from capture.outcome_watches import WatchBoard, decoded_watches
from capture.outcomes import watching
from capture.pairing import (
    Author,
    Identity,
    LoggedMessage,
    author_of,
    is_tombstone,
    logged_message,
    message_of,
    replaces,
    unchanged,
)
from capture.text import message_text
from common import task_names
from common.celery_app import celery
from common.runtime import Runtime
from common.telemetry.logs import event_fields
from workers.pairs.capturing import capture_answer_in

log = logging.getLogger("relmon.capture")


class LiveCapture:
    """Captures events on one process's runtime (its Redis, Slack client, channel rules and learnt bot users)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.log = ConversationLog(runtime.redis, self.settings.question_ttl_seconds)

    def capture_entry(self, entry: dict[str, Any]) -> None:
        """Capture one event as the bot received it: {"body": the envelope, "own": relmon's identity}."""
        body = entry["body"]
        event = body.get("event") or {}
        if event.get("type") in REACTION_EVENTS:
            self.on_reaction(event)
            return
        shared = body.get("is_ext_shared_channel")
        self.handle(event, body.get("team_id"), Identity(**entry["own"]), shared if isinstance(shared, bool) else None)

    def handle(self, event: dict[str, Any], team_id: str | None, own: Identity, ext_shared: bool | None = None) -> None:
        """Capture one message event; `ext_shared` is the envelope's is_ext_shared_channel (None: ask Slack)."""
        channel = event.get("channel")
        subtype = event.get("subtype")
        if ignored(event, self.settings, self.runtime.rules):
            return
        if subtype == "message_deleted" or is_tombstone(event):
            self._deleted(channel, _as_deletion(event), own, team_id, ext_shared)
            return
        message = message_of(event)
        bots = self.runtime.bot_users
        monitored = bots.knows(message)
        author = author_of(message, monitored, own)
        if author == Author.OWN:
            return
        if author == Author.MONITORED_BOT:
            bots.learn(message)
        conversation = self.log
        existing = conversation.get(channel, message["ts"])
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
            return  # a stream's opener after its completion, or an edit that changed nothing
        if author == Author.MONITORED_BOT:
            self._store_answer(channel, logged, team_id, event.get("channel_type"), ext_shared)
        elif author == Author.HUMAN:
            # A person's message after a watched answer tells its outcome: a worker reads it from the log.
            hand_on_message(channel, logged.ts, self._logged_watching(channel, logged))
        else:
            conversation.record(channel, logged)
        if subtype == "message_changed" and author in (Author.HUMAN, Author.MONITORED_BOT):
            # Handed on once the edit is stored (as a deletion's scrub follows its tombstone): the scrub then finds
            # the pair holding the edited text, and its re-judgment's redraw is the one that updates the alert.
            self._edited(channel, event, existing, logged)

    # Answers -----------------------------------------------------------------------------------

    def _store_answer(
        self,
        channel: str,
        message: LoggedMessage,
        team_id: str | None,
        channel_type: str | None,
        ext_shared: bool | None,
        *,
        record: bool = True,
    ) -> None:
        """Store the answer `message` belongs to, in this task (workers.pairs.capturing), logging `message` in the
        same round trip as the capture's first read (unless `record` is off: a tombstone already logged). The
        capture logs "answer captured"."""
        capture_answer_in(
            self.runtime,
            channel,
            message.ts,
            thread_ts=message.thread_ts if message.in_thread else None,
            team_id=team_id,
            channel_type=channel_type,
            ext_shared=ext_shared,
            logged=None if record else to_wire(message),
            fresh=message if record else None,
        )

    def _deleted(
        self, channel: str, event: dict[str, Any], own: Identity, team_id: str | None, ext_shared: bool | None
    ) -> None:
        ts = event.get("deleted_ts") or (event.get("previous_message") or {}).get("ts")
        if not ts:
            return
        conversation = self.log
        previous = dict(event.get("previous_message") or {}, ts=ts)
        existing = conversation.get(channel, ts)
        author = existing.author if existing else author_of(previous, self.runtime.bot_users.knows(previous), own)
        if author in (Author.HUMAN, Author.MONITORED_BOT):  # what it said, for the worker that scrubs its copies
            said = [message_text(existing.content) if existing else "", message_text(previous)]
            self._note_forget(channel, ts, said, edited=False)
        tombstone = conversation.mark_deleted(channel, ts, fallback=logged_message(previous, author, content={}))
        if author == Author.MONITORED_BOT and tombstone is not None:
            self._store_answer(channel, tombstone, team_id, event.get("channel_type"), ext_shared, record=False)
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

    # Outcomes ----------------------------------------------------------------------------------

    def _logged_watching(self, channel: str, message: LoggedMessage) -> list[int]:
        """Log a person's message and read the open watches it concerns, in one transaction (the rule:
        capture.outcomes.watching). In this order: a worker opening a window puts its watch up before it reads the
        log, so it finds this message there, or this read finds its watch."""
        key = WatchBoard(self.runtime.redis).candidates_key(channel, message)
        pipe = self.runtime.redis.pipeline(transaction=True)
        self.log.queue_record(pipe, channel, message)
        if key is not None:  # else no watch can concern it
            pipe.hvals(key)
        replies = pipe.execute()
        return watching(decoded_watches(replies[-1]), message, time.time()) if key is not None else []

    def on_reaction(self, event: dict[str, Any]) -> None:
        if ignored(event, self.settings, self.runtime.rules):
            return
        item = event["item"]
        channel, ts, emoji, user = item["channel"], item["ts"], event["reaction"], event["user"]
        watch = WatchBoard(self.runtime.redis).of_answer(channel, ts)
        if watch is None:
            return
        added = event.get("type") == "reaction_added"
        at = _seconds(event.get("event_ts")) or time.time()
        celery.send_task(task_names.OBSERVE_REACTION, args=[watch.pair_id, user, emoji, added, at])
        log.info("reaction handed on", extra=event_fields(channel=channel, message_ts=ts, pair_id=watch.pair_id))


def hand_on_message(channel: str, ts: str, pair_ids: list[int]) -> None:
    """One task for the message, whatever the number of pairs it concerns: the worker reads it once."""
    if pair_ids:
        celery.send_task(task_names.OBSERVE_MESSAGE, args=[pair_ids, channel, ts])


def _as_deletion(event: dict[str, Any]) -> dict[str, Any]:
    """A message_deleted, or a tombstone's message_changed, as the deletion of one message."""
    if event.get("subtype") == "message_deleted":
        return event
    inner = message_of(event)
    return dict(event, deleted_ts=inner.get("ts"), previous_message=event.get("previous_message") or inner)


def _seconds(ts: Any) -> float | None:
    try:
        return float(ts)
    except (TypeError, ValueError):
        return None
