"""Which Slack events capture takes, decided from the event alone (no I/O): the bot's capture listener drops the rest
before it publishes an event (bot.listeners.capture), and the worker's capture (workers.live_capture) checks again (a
spooled or replayed event, the rules changed meanwhile)."""

from __future__ import annotations

from typing import Any

from capture.notices import is_notice
from capture.pairing import channel_ignore_reason, is_bookkeeping, is_tombstone, message_of
from store.rules import ChannelRules
from store.settings import Settings

REACTION_EVENTS = ("reaction_added", "reaction_removed")


def ignored(event: dict[str, Any], settings: Settings, rules: ChannelRules) -> bool:
    """An event nothing is captured of: an unwatched channel, a notice, a reaction without a message, an edit in
    which only reply bookkeeping moved."""
    if event.get("type") in REACTION_EVENTS:
        item = event.get("item") or {}
        wanted = item.get("type") == "message" and item.get("ts") and event.get("reaction") and event.get("user")
        return not wanted or channel_ignore_reason(item.get("channel"), settings, rules) is not None
    if channel_ignore_reason(event.get("channel"), settings, rules):
        return True
    if event.get("subtype") == "message_deleted" or is_tombstone(event):
        return False
    message = message_of(event)
    # A notice (or one edited), or a root re-sent for its reply count: nothing anyone said changed.
    return not message.get("ts") or is_notice(message) or is_bookkeeping(event)
