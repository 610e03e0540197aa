"""Nobody's words: Slackbot's messages and Slack's notices (joins, topics, pins, a huddle's root, tombstones, and
any subtype Slack adds later) are never a question, an earlier turn, a reference, a re-ask or a takeover. One
rule for every path: events, a broadcast's `root`, conversations.replies and .history, exports."""

from __future__ import annotations

from typing import Any

SLACKBOT = "USLACKBOT"
# The subtypes a person's (or a bot's) message has; every other one is a notice of Slack's: a join, a topic, a pin,
# a huddle's root, a tombstone, and any subtype Slack adds later. An allow-list, so nothing new is taken for words.
WORDS_SUBTYPES = frozenset({"thread_broadcast", "file_share", "me_message", "bot_message"})
# The notices relmon has met (documentation and tests): all of them, and any subtype outside WORDS_SUBTYPES, are
# notices (`is_notice`).
IGNORED_SUBTYPES = frozenset(
    {
        "channel_join",
        "channel_leave",
        "channel_topic",
        "channel_purpose",
        "channel_name",
        "channel_archive",
        "channel_unarchive",
        "group_join",
        "group_leave",
        "group_topic",
        "group_purpose",
        "group_name",
        "group_archive",
        "group_unarchive",
        "pinned_item",
        "unpinned_item",
        "ekm_access_denied",
        "channel_posting_permissions",
        "reminder_add",
        "message_replied",
        "assistant_app_thread",
        "huddle_thread",
        "bot_add",
        "bot_remove",
        "bot_enable",
        "bot_disable",
        "app_conversation_join",
        "app_conversation_leave",
        "channel_canvas_updated",
        "channel_convert_to_private",
        "channel_convert_to_public",
        "sh_room_created",
        "tombstone",
    }
)


def is_notice(message: dict[str, Any]) -> bool:
    """Nobody's words: a message from Slackbot, or of a subtype that is not a person's or a bot's message (a
    huddle's root, a join, a topic, a tombstone, or one relmon does not know). The one decision every path makes
    (events, a broadcast's `root`, conversations.replies and .history, exports): a notice is never a question, an
    earlier turn, a reference, a re-ask or a takeover. `message`: the message itself (message_of(event))."""
    if message.get("user") == SLACKBOT:
        return True
    subtype = message.get("subtype")
    return bool(subtype) and subtype not in WORDS_SUBTYPES
