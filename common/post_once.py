"""Posting at most once (`PostOnce`), and the records it keeps; used for alerts, summaries, digests, on-demand
verdicts and the budget notice. relmon's own messages carry a key in Slack message metadata, so a task that died
after Slack accepted a post (but before recording it) can find that post instead of posting it twice.

Three records bridge the gap between sending a post and the database recording it:
- the mark in the message's metadata (`mark`, `find_marked`): in Slack itself, found by reading the channel;
- a receipt in Redis (`remember_post`, `recall_post`), left the moment Slack answers that it took the post;
- an attempt note in Redis (`note_attempt`, `attempted`), left just before the post is sent: a later attempt
  that finds the note but no receipt knows the earlier one may have posted without hearing back (a timeout, a
  connection closed after sending, the worker killed mid-call) and looks in the channel before posting again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from http.client import HTTPException
from typing import TypeVar
from urllib.error import URLError

import redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

T = TypeVar("T")
HISTORY_PAGE = 100
HISTORY_PAGES = 10  # the most history pages one look reads (1,000 messages)


def mark(event_type: str, key: str, value: str) -> dict:
    """The `metadata` argument of chat.postMessage that labels a post."""
    return {"event_type": event_type, "event_payload": {key: value}}


def find_marked(slack: WebClient, channel: str, since: datetime, event_type: str, key: str, value: str) -> str | None:
    """The ts of a message in `channel` posted since `since` that carries this mark, or None. The history API is
    rate-limited: ask only when a post may have gone through unrecorded. None also when history cannot be read
    (then the caller posts: a rare duplicate beats a missing message). A call that gets no answer raises: the
    caller's retry looks again rather than posting blind."""
    cursor = None
    for _ in range(HISTORY_PAGES):
        try:
            history = slack.conversations_history(
                channel=channel,
                oldest=f"{since.timestamp() - 1:.6f}",
                limit=HISTORY_PAGE,
                include_all_metadata=True,
                **({"cursor": cursor} if cursor else {}),
            )
        except SlackApiError:
            return None
        for message in history.get("messages", []):
            metadata = message.get("metadata") or {}
            if metadata.get("event_type") == event_type and (metadata.get("event_payload") or {}).get(key) == value:
                return message.get("ts")
        cursor = (history.get("response_metadata") or {}).get("next_cursor")
        if not history.get("has_more") or not cursor:
            return None
    return None


def outcome_unknown(error: BaseException) -> bool:
    """A Web API call that was sent whole but got no answer (a timeout, the connection closed or reset, a
    garbled answer): Slack may have carried it out. urllib raises whatever fails while connecting or sending as
    a URLError (nothing was sent), whatever fails while waiting for the answer as is."""
    return isinstance(error, (OSError, HTTPException)) and not isinstance(error, URLError)


# A receipt in Redis bridges the gap between Slack accepting a post and the database recording it: when the
# database is down at that moment, the task retries, and the retry finds the receipt instead of posting again.
# Far longer than any redelivery: a dead worker's task comes back a lease (RELMON_VISIBILITY_TIMEOUT) later.
RECEIPT_TTL_SECONDS = 7 * 24 * 3600


def _receipt_key(key: str) -> str:
    return f"relmon:posted:{key}"


def _attempt_key(key: str) -> str:
    return f"relmon:post-attempt:{key}"


def remember_post(redis_client, key: str, message_ts: str | None, ttl_seconds: int = RECEIPT_TTL_SECONDS) -> None:
    """Note at once that the post labelled `key` went out (before the database write that records it)."""
    redis_client.set(_receipt_key(key), message_ts or "", ex=ttl_seconds)


def recall_post(redis_client, key: str) -> str | None:
    """The receipt left by `remember_post`: the message ts ("" when Slack gave none), or None if never posted."""
    value = redis_client.get(_receipt_key(key))
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value


def note_attempt(redis_client, key: str, ttl_seconds: int = RECEIPT_TTL_SECONDS) -> None:
    """Note, just before sending it, that the post labelled `key` is going out. The note lives in the same Redis
    as the task's retry message: whatever retry there is finds it."""
    redis_client.set(_attempt_key(key), "1", ex=ttl_seconds)


def attempted(redis_client, key: str) -> bool:
    """Whether an earlier attempt sent (or was about to send) the post labelled `key`."""
    return bool(redis_client.exists(_attempt_key(key)))


class Receipts:
    """The Redis records of posts, optionally tolerant of Redis being down (`log` names what a failure is
    logged as): then an unreadable receipt or note counts as none, and one not kept is logged, not raised; the
    caller's other records (its claim, the metadata mark) still find the post."""

    def __init__(self, redis_client, *, ttl_seconds: int = RECEIPT_TTL_SECONDS, log: logging.Logger | None = None):
        self.redis, self.ttl_seconds, self.log = redis_client, ttl_seconds, log

    def _tolerated(self, what: str, key: str, action: Callable[[], T], default: T) -> T:
        if self.redis is None:
            return default
        if self.log is None:
            return action()
        try:
            return action()
        except redis.exceptions.RedisError as error:
            self.log.warning(what, extra={"key": key, "error": repr(error)[:200]})
            return default

    def recall(self, key: str) -> str | None:
        return self._tolerated("post receipt unreadable", key, lambda: recall_post(self.redis, key), None)

    def remember(self, key: str, message_ts: str | None) -> None:
        self._tolerated(
            "post receipt not kept", key, lambda: remember_post(self.redis, key, message_ts, self.ttl_seconds), None
        )

    def note_attempt(self, key: str) -> None:
        self._tolerated("post attempt not noted", key, lambda: note_attempt(self.redis, key, self.ttl_seconds), None)

    def attempted(self, key: str) -> bool:
        return self._tolerated("post attempt unreadable", key, lambda: attempted(self.redis, key), False)


@dataclass(frozen=True)
class PostOnce:
    """The one protocol by which relmon makes a post at most once. The caller claims the post first (a SQL row
    unique on its key, which decides who posts); then, under that claim:
    1. `earlier`: was it posted already? Its receipt, else (when `look` says an earlier attempt may have posted
       without being recorded) the message carrying its mark in the channel's history;
    2. `post` (chat.postMessage with the mark) or `deliver` (any other way of sending): an attempt note just
       before sending (`notes_attempts`), the receipt the moment it went out;
    3. the caller records the post on its claim.

    What differs between posts is said here: the mark (`event_type`, `field`; None: the post carries none and
    cannot be found in history) and the receipts (their lifetime, whether Redis may be down, or none at all)."""

    slack: WebClient | None
    receipts: Receipts
    key: str
    event_type: str | None = None
    field: str = "dedupe_key"
    notes_attempts: bool = True

    def attempted(self) -> bool:
        """Whether an earlier attempt sent, or was about to send, this post (its note stands)."""
        return self.notes_attempts and self.receipts.attempted(self.key)

    def earlier(self, channel: str, since: datetime, *, look: bool) -> str | None:
        """The ts of an earlier post ("" when it had none), or None when none is known."""
        found = self.receipts.recall(self.key)
        if found is None and look and self.event_type is not None and self.slack is not None:
            found = find_marked(self.slack, channel, since, self.event_type, self.field, self.key)
        return found

    def post(self, channel: str, **payload) -> dict:
        """chat.postMessage carrying the mark, noted before it is sent and receipted the moment Slack answers."""
        if self.notes_attempts:
            self.receipts.note_attempt(self.key)
        marked = {"metadata": mark(self.event_type, self.field, self.key)} if self.event_type else {}
        response = self.slack.chat_postMessage(channel=channel, **marked, **payload)
        self.receipts.remember(self.key, response.get("ts"))
        return response

    def deliver(self, send: Callable[[], str]) -> str:
        """Send it some other way (`send` returns where or how it went) unless its receipt says it went."""
        where = self.receipts.recall(self.key)
        if not where:
            where = send()
            self.receipts.remember(self.key, where)
        return where
