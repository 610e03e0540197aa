"""Message events in the shapes Slack sends in 2026, as another app in the channel receives them: a natively
streamed reply (an empty opener, then one message_changed that completes it, whose event_ts can be the
earlier one), a table answer, a bot's file upload (file_share with the bot's user and no bot_id), a thread
root re-sent for its reply bookkeeping, a root deleted into a tombstone, and notices with no words.

Built after Slack's Events API payloads and the SDKs' fixtures; the defaults match tests/slack_requests.py
(team T_TEST, the support bot B_SUPPORT / A_SUPPORT / U_SUPPORT)."""

from __future__ import annotations

from typing import Any

from tests.slack_requests import TEAM_ID, human_message

BOT = {"bot_id": "B_SUPPORT", "app_id": "A_SUPPORT", "user": "U_SUPPORT"}


def _bot_profile(bot_id: str, app_id: str) -> dict[str, Any]:
    return {
        "id": bot_id,
        "deleted": False,
        "name": "Support Bot",
        "updated": 1767225600,
        "app_id": app_id,
        "icons": {"image_36": "https://a.slack-edge.com/80588/img/plugins/app/bot_36.png"},
        "team_id": TEAM_ID,
    }


def _channel_type(channel: str) -> str:
    return "group" if channel.startswith("G") else "channel"


def stream_opener(
    channel: str, ts: str, thread_ts: str, *, bot_id: str = "B_SUPPORT", app_id: str = "A_SUPPORT"
) -> dict[str, Any]:
    """chat.startStream as others see it: a plain bot message with empty text, no blocks, in_progress."""
    return {
        "user": "U_SUPPORT",
        "type": "message",
        "ts": ts,
        "bot_id": bot_id,
        "app_id": app_id,
        "text": "",
        "team": TEAM_ID,
        "bot_profile": _bot_profile(bot_id, app_id),
        "thread_ts": thread_ts,
        "parent_user_id": "U_ASKER",
        "streaming_state": "in_progress",
        "channel": channel,
        "event_ts": ts,
        "channel_type": _channel_type(channel),
    }


def rich_text(text: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "rich_text",
            "block_id": "Xz1",
            "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}],
        }
    ]


def stream_completion(opener: dict[str, Any], text: str, *, state: str = "completed") -> dict[str, Any]:
    """chat.stopStream as others see it: one message_changed whose inner message carries rich_text blocks,
    mrkdwn text and the final streaming_state; its outer event_ts is *earlier* than the opener's ts."""
    seconds, micro = opener["ts"].split(".")
    event_ts = f"{seconds}.{max(int(micro) - 1, 0):06d}"
    inner_keys = ("channel", "event_ts", "channel_type")
    previous = {k: v for k, v in opener.items() if k not in inner_keys}
    message = dict(previous, text=text, blocks=rich_text(text), streaming_state=state)
    return {
        "type": "message",
        "subtype": "message_changed",
        "message": message,
        "previous_message": previous,
        "channel": opener["channel"],
        "hidden": True,
        "ts": event_ts,
        "event_ts": event_ts,
        "channel_type": opener["channel_type"],
    }


def table_answer(channel: str, ts: str, thread_ts: str) -> dict[str, Any]:
    """A bot answer that is a table (rows of raw_text and rich_text cells) with a short text fallback."""
    cell = {
        "type": "rich_text",
        "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": "$10"}]}],
    }
    return {
        "user": "U_SUPPORT",
        "type": "message",
        "ts": ts,
        "bot_id": "B_SUPPORT",
        "app_id": "A_SUPPORT",
        "text": "Pricing table",
        "team": TEAM_ID,
        "bot_profile": _bot_profile("B_SUPPORT", "A_SUPPORT"),
        "blocks": [
            {
                "type": "table",
                "block_id": "t1",
                "column_settings": [{"is_wrapped": True}, {"align": "right"}],
                "rows": [
                    [{"type": "raw_text", "text": "Plan"}, {"type": "raw_text", "text": "Price"}],
                    [{"type": "raw_text", "text": "Pro"}, cell],
                ],
            }
        ],
        "thread_ts": thread_ts,
        "parent_user_id": "U_ASKER",
        "channel": channel,
        "event_ts": ts,
        "channel_type": _channel_type(channel),
    }


def bot_file_upload(channel: str, ts: str, thread_ts: str, *, user: str = "U_SUPPORT") -> dict[str, Any]:
    """files.completeUploadExternal by a bot: subtype file_share, the bot's user, and no bot_id."""
    return {
        "type": "message",
        "text": "Here is the setup guide.",
        "files": [
            {
                "id": "F0ABCDEF123",
                "created": 1767225600,
                "timestamp": 1767225600,
                "name": "setup-guide.pdf",
                "title": "Setup guide",
                "mimetype": "application/pdf",
                "filetype": "pdf",
                "pretty_type": "PDF",
                "user": user,
                "user_team": TEAM_ID,
                "mode": "hosted",
                "is_external": False,
                "size": 52011,
                "url_private": "https://files.slack.com/files-pri/T_TEST-F0ABCDEF123/setup-guide.pdf",
                "permalink": "https://example.slack.com/files/U_SUPPORT/F0ABCDEF123/setup-guide.pdf",
            }
        ],
        "upload": False,
        "user": user,
        "display_as_bot": False,
        "ts": ts,
        "thread_ts": thread_ts,
        "parent_user_id": "U_ASKER",
        "channel": channel,
        "subtype": "file_share",
        "event_ts": ts,
        "channel_type": _channel_type(channel),
    }


def root_bookkeeping(root: dict[str, Any], reply_ts: str, reply_users: list[str], event_ts: str) -> dict[str, Any]:
    """Slack re-sending a thread's root after a reply: only thread_ts, reply_count, reply_users(_count),
    latest_reply, is_locked and subscribed move; no `edited`, the text is identical."""
    inner_keys = ("channel", "event_ts", "channel_type")
    previous = {k: v for k, v in root.items() if k not in inner_keys}
    message = dict(
        previous,
        thread_ts=root["ts"],
        reply_count=int(previous.get("reply_count", 0)) + 1,
        reply_users=reply_users,
        reply_users_count=len(reply_users),
        latest_reply=reply_ts,
        is_locked=False,
        subscribed=False,
    )
    return {
        "type": "message",
        "subtype": "message_changed",
        "message": message,
        "previous_message": previous,
        "channel": root["channel"],
        "hidden": True,
        "ts": event_ts,
        "event_ts": event_ts,
        "channel_type": root.get("channel_type", _channel_type(root["channel"])),
    }


def tombstone(root: dict[str, Any], event_ts: str) -> dict[str, Any]:
    """A thread root with replies deleted: a message_changed into subtype tombstone, not a message_deleted."""
    inner_keys = ("channel", "event_ts", "channel_type")
    previous = {k: v for k, v in root.items() if k not in inner_keys}
    message = {
        "type": "message",
        "subtype": "tombstone",
        "text": "This message was deleted.",
        "user": "USLACKBOT",
        "hidden": True,
        "ts": root["ts"],
        "thread_ts": root["ts"],
        "reply_count": previous.get("reply_count", 1),
        "reply_users": previous.get("reply_users", ["U_SUPPORT"]),
        "latest_reply": previous.get("latest_reply", root["ts"]),
    }
    return {
        "type": "message",
        "subtype": "message_changed",
        "message": message,
        "previous_message": previous,
        "channel": root["channel"],
        "hidden": True,
        "ts": event_ts,
        "event_ts": event_ts,
        "channel_type": root.get("channel_type", _channel_type(root["channel"])),
    }


def notice(channel: str, ts: str, subtype: str, *, user: str = "U_ASKER") -> dict[str, Any]:
    """A notice with no words from a person: channel_join, huddle_thread, bot_add, bot_remove,
    app_conversation_join, channel_canvas_updated, and the channel's own changes (leave, topic, purpose, name,
    converted to private, a pin, a reminder): each carries the words Slack writes, none of them a person's."""
    texts = {
        "channel_leave": f"<@{user}> has left the channel",
        "channel_topic": f"<@{user}> set the channel topic: How do I get support?",
        "channel_purpose": f"<@{user}> set the channel purpose: Ask us anything about billing?",
        "channel_name": f'<@{user}> renamed the channel from "help" to "support"',
        "channel_convert_to_private": f"<@{user}> made this channel *private*",
        "pinned_item": f"<@{user}> pinned a message to this channel.",
        "reminder_add": f"<@{user}> set up a reminder \u201cwhy is the export slow?\u201d in this channel",
        "channel_join": f"<@{user}> has joined the channel",
        "huddle_thread": "",
        "bot_add": "added an integration to this channel: <https://example.slack.com/services/B1|helper>",
        "bot_remove": "removed an integration from this channel: <https://example.slack.com/services/B1|helper>",
        "app_conversation_join": f"<@{user}> has joined the channel",
        "channel_canvas_updated": "",
    }
    event: dict[str, Any] = {
        "type": "message",
        "subtype": subtype,
        "user": user,
        "text": texts.get(subtype, ""),
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "channel_type": _channel_type(channel),
    }
    if subtype == "huddle_thread":
        event["room"] = {"id": "R0HUDDLE", "name": "", "media_server": "", "created_by": user, "date_start": 0}
        event["no_notifications"] = False
    return event


NOTICE_SUBTYPES = (
    "channel_join",
    "huddle_thread",
    "bot_add",
    "bot_remove",
    "app_conversation_join",
    "channel_canvas_updated",
    "channel_leave",
    "channel_topic",
    "channel_purpose",
    "channel_name",
    "channel_convert_to_private",
    "pinned_item",
    "reminder_add",
)


def huddle_root(channel: str, ts: str, *, started_by: str = "U_ASKER") -> dict[str, Any]:
    """Slackbot's notice that roots a huddle's thread: user USLACKBOT (no bot_id), subtype huddle_thread, a
    `room` object, text "A huddle started"."""
    return {
        "type": "message",
        "subtype": "huddle_thread",
        "user": "USLACKBOT",
        "text": "A huddle started",
        "ts": ts,
        "thread_ts": ts,
        "room": {
            "id": "R0HUDDLE",
            "name": "",
            "media_server": "",
            "created_by": started_by,
            "date_start": int(float(ts)),
            "date_end": 0,
            "participants": [started_by],
            "participant_history": [started_by],
            "participants_camera_on": [],
            "participants_camera_off": [],
            "participants_screenshare_on": [],
            "participants_screenshare_off": [],
            "has_ended": False,
        },
        "no_notifications": False,
        "permalink": f"https://example.slack.com/call/R0HUDDLE?thread_ts={ts}",
        "channel": channel,
        "event_ts": ts,
        "channel_type": _channel_type(channel),
    }


def slackbot_message(channel: str, ts: str, text: str, *, thread_ts: str | None = None) -> dict[str, Any]:
    """A message from Slackbot itself (a custom response, a reminder firing): no subtype, user USLACKBOT."""
    event = human_message(channel, ts, text, user="USLACKBOT", thread_ts=thread_ts)
    del event["client_msg_id"]  # no client wrote it
    return event
