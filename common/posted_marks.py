"""relmon's own messages carry a key in Slack message metadata, so a task that died after Slack accepted a post
(but before recording it) can find that post instead of posting it twice. Used for alerts, summaries and digests.

Three records bridge the gap between sending a post and the database recording it:
- the mark in the message's metadata (`mark`, `find_marked`): in Slack itself, found by reading the channel;
- a receipt in Redis (`remember_post`, `recall_post`), left the moment Slack answers that it took the post;
- an attempt note in Redis (`note_attempt`, `attempted`), left just before the post is sent: a later attempt
  that finds the note but no receipt knows the earlier one may have posted without hearing back (a timeout, a
  connection closed after sending, the worker killed mid-call) and looks in the channel before posting again.
"""

from __future__ import annotations

from datetime import datetime
from http.client import HTTPException
from urllib.error import URLError

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

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
# Longer than the broker's visibility timeout (2 h by default), after which a dead worker's task comes back.
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
