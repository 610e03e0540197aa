"""What one capture task reads and writes in Redis, in one place (the adapter of workers.pairs.capturing): the
task loads a frozen `CaptureContext` (the message, the messages around it, the mark of what was last stored of its
answer, its channel's flags) and, once the answer is stored, writes the new mark. The capture's steps take that
context as plain data.

Layout:
    relmon:capture:stored:{channel}:{answer_ts}   "{mark}:{pair_id}" of the answer last stored (`mark_of`)
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from capture.conversation_log import ConversationLog
from capture.directory import ChannelFlags
from capture.pairing import Author, LoggedMessage, answer_run
from common.runtime import Runtime


@dataclass(frozen=True)
class Held:
    """What was last stored of one answer: its mark and the pair it was stored as (None: nothing yet)."""

    mark: str | None = None
    pair_id: int | None = None


@dataclass(frozen=True)
class CaptureContext:
    """Everything a capture decides on, read before it decides. `run`, `held` and `flags` are set only for an
    answer to store (a monitored bot's message not deleted): the answer's messages, what was last stored of it
    (by its first message's ts), the channel's flags."""

    channel: str
    message: LoggedMessage | None
    around: list[LoggedMessage]
    run: list[LoggedMessage]
    held: Held = Held()
    flags: ChannelFlags | None = None

    @property
    def is_answer(self) -> bool:
        return bool(self.run)


def mark_of(text: str, parts: list[LoggedMessage], *flags: Any) -> str:
    """A digest of everything the store keeps of an answer: its text, its parts and their flags. A task run again
    (redelivered after its worker died, or retried after a later step failed) finds the same mark and changes
    nothing, so it cannot re-open an answer that was judged meanwhile (an answer version is judged once)."""
    seen = json.dumps([text, *flags, [(p.ts, p.deleted) for p in parts]], separators=(",", ":"))
    return hashlib.sha256(seen.encode()).hexdigest()


def _mark_key(channel: str, answer_ts: str) -> str:
    return f"relmon:capture:stored:{channel}:{answer_ts}"


def _held(raw: bytes | str | None) -> Held:
    if raw is None:
        return Held()
    mark, _, pair_id = (raw if isinstance(raw, str) else raw.decode()).partition(":")
    return Held(mark, int(pair_id) if pair_id.isdigit() else None)


class CaptureStore:
    """The capture's reads and writes on one runtime's Redis."""

    def __init__(self, runtime: Runtime, channel: str, *, channel_type: str | None, ext_shared: bool | None) -> None:
        self.runtime, self.channel = runtime, channel
        self.channel_type, self.ext_shared = channel_type, ext_shared
        self.ttl = int(runtime.settings.question_ttl_seconds)
        self.window = runtime.settings.toplevel_window_seconds
        self.log = ConversationLog(runtime.redis, self.ttl)

    def load(
        self,
        ts: str,
        thread_ts: str | None,
        fallback: LoggedMessage | None = None,
        *,
        fresh: LoggedMessage | None = None,
    ) -> CaptureContext:
        """The message at `ts` as the log has it (or `fallback`, the bot's copy, logged again when Redis lost it),
        and what is around it. Two round trips: the message with its index reads (placed by `thread_ts`, as the
        message's sender gave it; read again when the log places it elsewhere) and the mark of what was last
        stored of an answer whose first message is `ts` (most are one message), then one MGET. `fresh`: the
        message as its event gave it, logged in the first round trip's transaction (no read of it then)."""
        channel, log = self.channel, self.log
        placed = fresh if fresh is not None else LoggedMessage(ts=ts, thread_ts=thread_ts, author=Author.HUMAN)
        pipe = self.runtime.redis.pipeline(transaction=fresh is not None)
        if fresh is not None:
            log.queue_record(pipe, channel, fresh)
        else:
            log.queue_get(pipe, channel, ts)
        pipe.get(_mark_key(channel, ts))
        count = log.queue_around(pipe, channel, placed, self.window)
        replies = pipe.execute()
        raw, held_raw, index_replies = replies[-count - 2], replies[-count - 1], replies[-count:]
        message = fresh if fresh is not None else log.decoded(raw)
        if message is None:
            if fallback is None:
                return CaptureContext(channel, None, [], [])
            message = fallback
            log.record(channel, message)  # Redis lost it since the bot logged it: the bot's copy is news
            around = log.around(channel, message, self.window)
        else:
            around = log.around_read(channel, placed, message, index_replies, self.window)
        return self._context(message, around, _held(held_raw))

    def load_around(self, message: LoggedMessage) -> CaptureContext:
        """The context of a message already read (a deleted answer's earlier part): what is around it, and the
        mark of its answer."""
        return self._context(message, self.log.around(self.channel, message, self.window), None)

    def _context(self, message: LoggedMessage, around: list[LoggedMessage], held: Held | None) -> CaptureContext:
        if message.deleted or message.author != Author.MONITORED_BOT:
            return CaptureContext(self.channel, message, around, [])
        run = answer_run(message, around)
        if held is None or run[0].ts != message.ts:  # a later part: its answer's mark is its first message's
            held = _held(self.runtime.redis.get(_mark_key(self.channel, run[0].ts)))
        flags = self.runtime.known_channels.flags(self.channel, self.channel_type, self.ext_shared)
        return CaptureContext(self.channel, message, around, run, held, flags)

    def keep(self, answer_ts: str, mark: str, pair_id: int) -> None:
        """The answer is stored: its mark is kept, for a run of the same capture to find."""
        self.runtime.redis.set(_mark_key(self.channel, answer_ts), f"{mark}:{pair_id}", ex=self.ttl)
