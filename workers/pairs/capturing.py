"""Capturing an answer: the SQL side of capture, in the `capture_event` task (workers.live_capture).

For each change to a monitored bot's answer the live capture logs the message in Redis (capture.conversation_log)
and calls `capture_answer_in(channel, ts, ...)`, which reads the answer back from the log and upserts its pair (a
new version, status settling), then enqueues `settle_pair` (or, with no quiet time to wait, as for a finished
stream, settles it at once). Tasks can run out of
order or at once (several workers, retries): each reads the log under a lock per thread (a top-level message is
the root of its own: an answer's parts live in one thread, capture.pairing.answer_run), so the last one to run
stores the log's latest state, whatever order they ran in. A tombstone's capture passes the message as it logged
it: when Redis lost the log meanwhile, that copy is logged again rather than the answer lost.

A retried or replayed task is harmless: the pair is unique per answer, and an unchanged answer costs no version.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import redis

from capture.conversation_log import from_wire
from capture.pairing import (
    IN_PROGRESS,
    Author,
    LoggedMessage,
    settles_at_once,
    stream_errored,
    thread_messages,
    ts_key,
)
from common import task_names
from common.celery_app import celery
from common.runtime import Runtime
from common.telemetry.logs import event_fields
from store import pairs
from workers.pairs.capture_context import CaptureContext, CaptureStore, mark_of
from workers.pairs.settling import answer_text_of

log = logging.getLogger("relmon.capture")

LOCK_SECONDS = 30  # far longer than one capture takes; a dead worker's lock lapses on its own
LOCK_WAIT_SECONDS = 10


class ConversationBusy(Exception):
    """Another worker held the conversation's lock for longer than we wait: tried again shortly."""


@contextmanager
def conversation_lock(client: redis.Redis, channel: str, thread_key: str):
    """One capture at a time per thread (`thread_key`: its root's ts, a top-level message's own). Not one for the
    channel's whole top level: a bot answering there in a busy channel had every capture wait on that one lock."""
    lock = client.lock(f"relmon:capture:lock:{channel}:{thread_key}", timeout=LOCK_SECONDS)
    if not lock.acquire(blocking_timeout=LOCK_WAIT_SECONDS):
        raise ConversationBusy(f"{channel}:{thread_key}")
    try:
        yield
    finally:
        # It may have lapsed while we worked: what we wrote is still right (the pair's version decides).
        with suppress(redis.exceptions.LockError):
            lock.release()


def capture_answer_in(
    runtime: Runtime,
    channel: str,
    ts: str,
    *,
    thread_ts: str | None = None,
    team_id: str | None = None,
    channel_type: str | None = None,
    ext_shared: bool | None = None,
    logged: dict[str, Any] | None = None,
    fresh: LoggedMessage | None = None,
) -> str:
    """Store the answer the bot message `ts` belongs to as the log has it now and send its settle task; returns
    what happened. `logged`: the message as the capture logged it (wire form: a tombstone), logged again if Redis
    lost it; `fresh`: the message as the live capture has just taken it from its event, logged in the round trip of
    the first read."""
    store = CaptureStore(runtime, channel, channel_type=channel_type, ext_shared=ext_shared)
    capture = _Capture(runtime, store, team_id)
    with conversation_lock(runtime.redis, channel, thread_ts or ts):
        context = store.load(ts, thread_ts, from_wire(logged) if logged is not None else None, fresh=fresh)
        return capture.run(context)


@dataclass
class _Capture:
    """One capture task's run: where its reads and writes go."""

    runtime: Runtime
    io: CaptureStore
    team_id: str | None

    def run(self, context: CaptureContext) -> str:
        message = context.message
        if message is None:
            return "missing"
        if message.deleted:
            return self.deleted(message)
        if not context.is_answer:
            return "not an answer"
        return self.store(context)

    def store(self, context: CaptureContext) -> str:
        runtime, channel, settings = self.runtime, context.channel, self.runtime.settings
        message, run, flags = context.message, context.run, context.flags
        assert message is not None and flags is not None  # an answer's context (`is_answer`)
        root = run[0]
        answer_text = answer_text_of(run, settings.redact_pii)  # RELMON_REDACT_PII: before the store
        state, errored = message.streaming, stream_errored(run)
        mark = mark_of(answer_text, run, flags.restricted, flags.ext_shared, errored, state)
        if context.held.mark == mark:  # a replayed task: this very answer was stored, and its settle task sent
            return "unchanged"
        merged = [p.ts for p in run[1:]]
        # Core, not the ORM session: once per answer, on the hot path. A one-message answer is one statement, run
        # in autocommit (no BEGIN and COMMIT round trips); a later part's merge goes in the upsert's transaction.
        with runtime.db.engine.begin() if merged else runtime.db.autocommit() as session:
            captured = pairs.upsert_captured(
                session,
                channel_id=channel,
                answer_ts=root.ts,
                answer_text=answer_text,
                team_id=self.team_id,
                thread_ts=root.thread_ts,
                answer_bot_id=root.bot_id or message.bot_id,
                channel_is_private=flags.restricted,
                channel_is_ext_shared=flags.ext_shared,
                stream_errored=errored,
                max_rejudge=settings.max_rejudge,
            )
            pairs.mark_merged(session, channel, merged)
        fields = event_fields(channel=channel, message_ts=root.ts, pair_id=captured.pair_id)
        if not captured.accepted:
            log.info("edit of a settled answer ignored", extra={**fields, "rejudges": captured.rejudges})
            return "ignored"
        # A stream still running waits for its completion's capture; one that ended needs no quiet time.
        if state == IN_PROGRESS:
            self.keep(root.ts, mark, captured.pair_id)
            log.info("answer streaming", extra=fields)
            return "streaming"
        # A finished stream needs no quiet time: no more text is coming. Sent before the mark is kept: a task that
        # dies between the two is replayed and sends it again (settling a version twice changes nothing); the other
        # way round a lost send would wait for the sweeper.
        countdown = 0 if settles_at_once(state) else settings.settle_seconds
        celery.send_task(task_names.SETTLE_PAIR, args=[captured.pair_id, captured.version], countdown=countdown)
        self.keep(root.ts, mark, captured.pair_id)
        log.info("answer captured", extra={**fields, "version": captured.version, "parts": len(run)})
        return "captured"

    def keep(self, answer_ts: str, mark: str, pair_id: int) -> None:
        """The answer is stored: its mark is kept."""
        self.io.keep(answer_ts, mark, pair_id)

    def deleted(self, tombstone: LoggedMessage) -> str:
        """A monitored bot's message was deleted: its answer is deleted, or the answer it was a later part of loses
        it."""
        channel = self.io.channel
        with self.runtime.db.session() as session:
            if pairs.mark_deleted(session, channel, tombstone.ts):
                log.info("answer deleted before judging", extra=event_fields(channel=channel, message_ts=tombstone.ts))
                return "deleted"
        around = self.io.load_around(tombstone).around
        before = [m for m in thread_messages(tombstone.thread_key, around) if ts_key(m) < ts_key(tombstone)]
        if before and before[-1].author == Author.MONITORED_BOT and not before[-1].deleted:
            return self.store(self.io.load_around(before[-1]))
        return "nothing to change"
