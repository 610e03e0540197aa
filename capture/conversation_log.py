"""The conversation log: recent messages of watched channels, kept in Redis for a while, so questions
come from events as they arrive rather than from Slack's rate-limited history methods.

Layout (every key expires after `ttl` seconds without writes):
    relmon:msg:{channel}:{ts}            JSON of one LoggedMessage
    relmon:top:{channel}                 sorted set of top-level ts (score = ts as a number)
    relmon:top:{channel}:by:{user}       sorted set of one person's top-level ts (an outcome window's catch-up
                                         reads the asker's, not the whole channel's: in a busy channel that
                                         read grew with the channel's traffic)
    relmon:thread:{channel}:{root_ts}    sorted set of a thread's reply ts

`HistoryFallback` fetches `conversations.replies` / `conversations.history` when the log lacks a
question: at most N calls a minute across all processes (a token bucket in Redis; every page of a long
thread is one call), and after a 429 none until Slack's Retry-After has passed (slack_sdk's own retry
handler waits out the first ones).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import fields, replace
from typing import Any

import redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from capture.pairing import Author, LoggedMessage, could_be_question

log = logging.getLogger("relmon.capture")

PREFIX = "relmon"
# The newest top-level messages read before a top-level answer at first: its question is nearly always among them
# (the rules take the latest one a person wrote); more are read, in larger batches, only when it is not.
TOP_BATCH = 20


def to_wire(message: LoggedMessage) -> dict[str, Any]:
    """A logged message as plain JSON data (the log's own form; a task argument)."""
    # Shallow: asdict() deep-copied the content (blocks, files) of every message the bot logs, only to dump it.
    data = {name: getattr(message, name) for name in _FIELDS}
    data["author"] = str(message.author)
    if not message.external:
        del data["external"]  # the form an older worker reads (most messages)
    return data


_FIELDS = tuple(field.name for field in fields(LoggedMessage))


def from_wire(data: dict[str, Any]) -> LoggedMessage:
    return LoggedMessage(**{**data, "author": Author(data["author"])})


def _to_json(message: LoggedMessage) -> str:
    return json.dumps(to_wire(message), separators=(",", ":"))


def _from_json(raw: bytes | str) -> LoggedMessage:
    return from_wire(json.loads(raw))


class ConversationLog:
    def __init__(self, client: redis.Redis, ttl_seconds: int) -> None:
        self.redis = client
        self.ttl = int(ttl_seconds)

    def msg_key(self, channel: str, ts: str) -> str:
        """The key a message is logged under (the bot's hand-on script checks that nothing is logged there yet)."""
        return f"{PREFIX}:msg:{channel}:{ts}"

    def _top_key(self, channel: str) -> str:
        return f"{PREFIX}:top:{channel}"

    def _thread_key(self, channel: str, root_ts: str) -> str:
        return f"{PREFIX}:thread:{channel}:{root_ts}"

    def _writer_key(self, channel: str, user: str) -> str:
        return f"{PREFIX}:top:{channel}:by:{user}"

    def queue_record(self, pipe, channel: str, message: LoggedMessage) -> None:
        """`record`'s commands, queued on a transaction of an adapter's that sends them with its own (one round
        trip): the capture's load (workers.pairs.capture_context), the read of the watches a message concerns."""
        index = self._thread_key(channel, message.thread_key) if message.in_thread else self._top_key(channel)
        indexes = [index]
        if not message.in_thread and message.author == Author.HUMAN and message.user:
            indexes.append(self._writer_key(channel, message.user))
        horizon = time.time() - self.ttl
        pipe.set(self.msg_key(channel, message.ts), _to_json(message), ex=self.ttl)
        for key in indexes:
            pipe.zadd(key, {message.ts: float(message.ts)})
            pipe.zremrangebyscore(key, "-inf", horizon)  # entries whose message key has expired
            pipe.expire(key, self.ttl)

    def record(self, channel: str, message: LoggedMessage) -> None:
        """Add or replace one message (an edit replaces the text; a deleted mark survives edits)."""
        pipe = self.redis.pipeline(transaction=True)
        self.queue_record(pipe, channel, message)
        pipe.execute()

    def get(self, channel: str, ts: str) -> LoggedMessage | None:
        raw = self.redis.get(self.msg_key(channel, ts))
        return _from_json(raw) if raw else None

    def queue_get(self, pipe, channel: str, ts: str) -> None:
        """`get`'s command on an adapter's pipeline; its reply goes to `decoded`."""
        pipe.get(self.msg_key(channel, ts))

    @staticmethod
    def decoded(raw: bytes | str | None) -> LoggedMessage | None:
        return _from_json(raw) if raw else None

    def mark_deleted(self, channel: str, ts: str, fallback: LoggedMessage | None = None) -> LoggedMessage | None:
        """Mark a message deleted (kept as a tombstone so a late edit cannot revive it)."""
        current = self.get(channel, ts) or fallback
        if current is None:
            return None
        tombstone = replace(current, deleted=True, content={})
        self.record(channel, tombstone)
        return tombstone

    def _load(self, channel: str, timestamps: Iterable[bytes | str]) -> list[LoggedMessage]:
        keys = [self.msg_key(channel, _text(ts)) for ts in timestamps]
        if not keys:
            return []
        return [_from_json(raw) for raw in self.redis.mget(keys) if raw]

    def around(self, channel: str, message: LoggedMessage, window_seconds: float) -> list[LoggedMessage]:
        """Everything the pairing rules need to place `message`: its thread and, for a top-level message, the
        channel's top-level messages before it within the window, newest first back to one that could be its
        question (`capture.pairing.could_be_question`): not the whole window, whose size grows with the channel's
        traffic."""
        pipe = self.redis.pipeline(transaction=False)
        count = self.queue_around(pipe, channel, message, window_seconds)
        return self.around_from(channel, message, pipe.execute()[-count:], window_seconds)

    def get_around(
        self, channel: str, ts: str, thread_ts: str | None, window_seconds: float
    ) -> tuple[LoggedMessage | None, list[LoggedMessage]]:
        """The message at `ts` and `around` it, in two round trips instead of three: the index reads go with the
        GET, placed by `thread_ts` as the caller knows it (read again if the log says otherwise), then one MGET."""
        placed = LoggedMessage(ts=ts, thread_ts=thread_ts, author=Author.HUMAN)
        pipe = self.redis.pipeline(transaction=False)
        self.queue_get(pipe, channel, ts)
        self.queue_around(pipe, channel, placed, window_seconds)
        raw, *replies = pipe.execute()
        message = self.decoded(raw)
        if message is None:
            return None, []
        return message, self.around_read(channel, placed, message, replies, window_seconds)

    def around_read(
        self, channel: str, placed: LoggedMessage, message: LoggedMessage, replies: list, window_seconds: float
    ) -> list[LoggedMessage]:
        """`around` the message from what `queue_around` read for `placed` (where the caller thought it was),
        read again when the log places it elsewhere."""
        if (message.in_thread, message.thread_key) != (placed.in_thread, placed.thread_key):
            return self.around(channel, message, window_seconds)
        return self.around_from(channel, message, replies, window_seconds)

    def queue_since(self, pipe, channel: str, answer: LoggedMessage, *, until: float, asker: str | None) -> int:
        """What was logged after `answer` (up to `until`, seconds) that can tell its outcome, read on an adapter's
        pipeline (a window's watch goes up in the same transaction: workers.outcome_watching): the later messages
        of its thread, then the asker's later top-level messages. Queues the index reads and returns how many
        replies they take; `since_from` reads the messages they name in one MGET, when they name anything (mostly
        they do not: a window opens as its answer settles). Neither read grows with the channel's traffic, nor with
        what came before the answer."""
        after = f"({answer.seconds}"
        pipe.zrangebyscore(self._thread_key(channel, answer.thread_key), after, until)
        if asker:
            pipe.zrangebyscore(self._writer_key(channel, asker), after, until)
        return 2 if asker else 1

    def since_from(self, channel: str, replies: list) -> list[LoggedMessage]:
        """The messages `queue_since`'s replies name, in one MGET (none when they name nothing)."""
        return self._load(channel, dict.fromkeys(_text(ts) for reply in replies for ts in reply))

    def thread_between(self, channel: str, thread_key: str, after: str, before: str) -> list[LoggedMessage]:
        """The replies of a thread strictly between two ts, oldest first (one read of its index, one MGET)."""
        named = self.redis.zrangebyscore(self._thread_key(channel, thread_key), f"({after}", f"({before}")
        return sorted(self._load(channel, named), key=lambda m: (float(m.ts), m.ts))

    def queue_around(self, pipe, channel: str, message: LoggedMessage, window_seconds: float) -> int:
        """The index reads of `around` on an adapter's pipeline: the thread's replies, and for a top-level message
        the newest top-level ts up to it within the window (a first batch). Returns how many replies they take, for
        `around_from`. `message` need only be placed (its ts and thread_ts)."""
        pipe.zrange(self._thread_key(channel, message.thread_key), 0, -1)
        if message.in_thread:
            return 1
        pipe.zrevrangebyscore(
            self._top_key(channel), message.seconds, message.seconds - window_seconds, start=0, num=TOP_BATCH
        )
        return 2

    def around_from(
        self, channel: str, message: LoggedMessage, replies: list, window_seconds: float
    ) -> list[LoggedMessage]:
        """Load, in one MGET, the messages `queue_around`'s replies name (the thread's root first, `message` itself
        added); for a top-level message whose first batch holds nothing that could be its question, the batches
        before it too, each four times larger, back to one that does or to the window's start."""
        named = [message.thread_key, *(_text(ts) for reply in replies for ts in reply)]
        loaded = {m.ts: m for m in self._load(channel, dict.fromkeys(named))}
        found = {ts: loaded[ts] for ts in named if ts in loaded}
        found.setdefault(message.ts, message)
        if message.in_thread:
            return list(found.values())
        batch, top = TOP_BATCH, [_text(ts) for ts in replies[-1]]
        while len(top) == batch and not any(
            could_be_question(m) and m.ts != message.ts for ts in top if (m := found.get(ts)) is not None
        ):
            batch *= 4
            older = self.redis.zrevrangebyscore(
                self._top_key(channel), f"({top[-1]}", message.seconds - window_seconds, start=0, num=batch
            )
            top = [_text(ts) for ts in older]
            found.update({m.ts: m for m in self._load(channel, top)})
        return list(found.values())


def _text(ts: bytes | str) -> str:
    return ts.decode() if isinstance(ts, bytes) else ts


# A token bucket: `capacity` tokens, refilled at capacity per 60 s. Returns 1 when a token was taken.
_TOKEN_BUCKET = """
local key = KEYS[1]
local capacity = tonumber(ARGV[1])
local now = tonumber(ARGV[2])
local rate = capacity / 60.0
local state = redis.call('HMGET', key, 'tokens', 'at')
local tokens = tonumber(state[1]) or capacity
local at = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - at) * rate)
local taken = 0
if tokens >= 1 then
  tokens = tokens - 1
  taken = 1
end
redis.call('HSET', key, 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('EXPIRE', key, 120)
return taken
"""


MAX_THREAD_PAGES = 50  # 5,000 messages


class HistoryFallback:
    """Rate-limited reads of Slack history, used only when the log lacks a question."""

    def __init__(self, client: redis.Redis, slack: WebClient, *, calls_per_minute: int = 20) -> None:
        self.redis = client
        self.slack = slack
        self.calls_per_minute = calls_per_minute
        self._bucket = client.register_script(_TOKEN_BUCKET)
        self.bucket_key = f"{PREFIX}:history:bucket"
        self.blocked_key = f"{PREFIX}:history:blocked_until"

    def _may_call(self) -> bool:
        blocked_until = self.redis.get(self.blocked_key)
        if blocked_until and float(blocked_until) > time.time():
            return False
        return bool(self._bucket(keys=[self.bucket_key], args=[self.calls_per_minute, time.time()]))

    def _call(self, method: Callable[..., Any], **params: Any) -> dict[str, Any] | None:
        if not self._may_call():
            log.info("history fallback skipped: rate limit", extra={"method": method.__name__})
            return None
        try:
            return dict(method(**params).data)
        except SlackApiError as error:
            if error.response.status_code == 429:
                retry_after = float(error.response.headers.get("Retry-After", 60))
                self.redis.set(self.blocked_key, time.time() + retry_after, ex=max(1, int(retry_after) + 1))
            log.warning("history fallback failed", extra={"error": error.response.get("error")})
            return None

    def fetch(self, channel: str, answer: LoggedMessage, window_seconds: float) -> list[dict[str, Any]]:
        """The raw messages (API shape) that could hold the question of `answer`: its thread up to it, or
        the channel's top-level messages in the window before it. Empty when rate-limited."""
        if answer.in_thread:
            return self._thread(channel, answer)
        page = self._call(
            self.slack.conversations_history,
            channel=channel,
            oldest=f"{answer.seconds - window_seconds:.6f}",
            latest=answer.ts,
            inclusive=True,
            limit=15,  # Slack's page size for rate-limited apps; newest first, so the question is on it
        )
        return list((page or {}).get("messages", []))

    def _thread(self, channel: str, answer: LoggedMessage) -> list[dict[str, Any]]:
        """Every page of the thread up to the answer (Slack pages replies oldest first, so the latest question
        is on the last page). A thread cut short by the rate limit gives nothing: its last page could hold a
        later question than the pages read."""
        messages: list[dict[str, Any]] = []
        cursor = None
        for _ in range(MAX_THREAD_PAGES):
            params = {"cursor": cursor} if cursor else {}
            page = self._call(
                self.slack.conversations_replies,
                channel=channel,
                ts=answer.thread_key,
                latest=answer.ts,
                inclusive=True,
                limit=100,
                **params,
            )
            if page is None:
                return []
            messages.extend(page.get("messages", []))
            cursor = (page.get("response_metadata") or {}).get("next_cursor")
            if not page.get("has_more") or not cursor:
                return messages
        log.warning("history fallback: thread too long", extra={"pages": MAX_THREAD_PAGES})
        return []
