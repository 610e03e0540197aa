"""relmon's own messages carry a key in Slack message metadata, so a task that died after Slack accepted a post
(but before recording it) can find that post instead of posting it twice. Used for alerts and digests."""

from __future__ import annotations

from datetime import datetime

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError


def mark(event_type: str, key: str, value: str) -> dict:
    """The `metadata` argument of chat.postMessage that labels a post."""
    return {"event_type": event_type, "event_payload": {key: value}}


def find_marked(slack: WebClient, channel: str, since: datetime, event_type: str, key: str, value: str) -> str | None:
    """The ts of a message in `channel` posted since `since` that carries this mark, or None. The history API is
    rate-limited: ask only when a post may have gone through unrecorded. None also when history cannot be read
    (then the caller posts: a rare duplicate beats a missing message)."""
    try:
        history = slack.conversations_history(
            channel=channel, oldest=f"{since.timestamp() - 1:.6f}", limit=100, include_all_metadata=True
        )
    except SlackApiError:
        return None
    for message in history.get("messages", []):
        metadata = message.get("metadata") or {}
        if metadata.get("event_type") == event_type and (metadata.get("event_payload") or {}).get(key) == value:
            return message.get("ts")
    return None


# A receipt in Redis bridges the gap between Slack accepting a post and the database recording it: when the
# database is down at that moment, the task retries, and the retry finds the receipt instead of posting again.
RECEIPT_TTL_SECONDS = 7 * 24 * 3600


def _receipt_key(key: str) -> str:
    return f"relmon:posted:{key}"


def remember_post(redis_client, key: str, message_ts: str | None) -> None:
    """Note at once that the post labelled `key` went out (before the database write that records it)."""
    redis_client.set(_receipt_key(key), message_ts or "", ex=RECEIPT_TTL_SECONDS)


def recall_post(redis_client, key: str) -> str | None:
    """The receipt left by `remember_post`: the message ts ("" when Slack gave none), or None if never posted."""
    value = redis_client.get(_receipt_key(key))
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else value
