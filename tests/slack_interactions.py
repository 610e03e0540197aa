"""Interactive requests shaped as Slack sends them, form-encoded: slash commands, message shortcuts, block actions
and view submissions (`payload=`). Send them signed with tests.slack_requests.post.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import urlencode

from tests.slack_requests import TEAM_ID

TRIGGER_ID = "13345224609.738474920.8088930838d88f008e0"  # opaque: the bot hands it back to views.open


def slash_command(
    text: str,
    *,
    command: str = "/judge",
    user_id: str = "U_ASKER",
    channel_id: str = "C_SUPPORT",
    response_url: str = "https://hooks.slack.com/commands/T/1/x",
    trigger_id: str = TRIGGER_ID,
) -> bytes:
    return urlencode(
        {
            "token": "verification-token-unused",
            "team_id": TEAM_ID,
            "team_domain": "example",
            "channel_id": channel_id,
            "channel_name": "support",
            "user_id": user_id,
            "user_name": "ana",
            "command": command,
            "text": text,
            "api_app_id": "A_RELMON",
            "is_enterprise_install": "false",
            "response_url": response_url,
            "trigger_id": trigger_id,
        }
    ).encode()


def payload_body(payload: dict[str, Any]) -> bytes:
    """An interactive payload form-encoded as Slack posts it."""
    return urlencode({"payload": json.dumps(payload)}).encode()


def message_action_payload(
    message: dict[str, Any],
    *,
    callback_id: str = "judge_this_answer",
    user_id: str = "U_ASKER",
    channel_id: str | None = None,
    response_url: str = "https://hooks.slack.com/app/T/1/x",
    trigger_id: str = TRIGGER_ID,
) -> dict[str, Any]:
    channel = channel_id or message.get("channel", "C_SUPPORT")
    return {
        "type": "message_action",
        "token": "verification-token-unused",
        "action_ts": str(time.time()),
        "team": {"id": TEAM_ID, "domain": "example"},
        "user": {"id": user_id, "username": "ana", "team_id": TEAM_ID, "name": "ana"},
        "channel": {"id": channel, "name": "support"},
        "is_enterprise_install": False,
        "callback_id": callback_id,
        "trigger_id": trigger_id,
        "response_url": response_url,
        "message_ts": message["ts"],
        "message": {k: v for k, v in message.items() if k not in ("channel", "event_ts", "channel_type")},
    }


def message_action(message: dict[str, Any], **kwargs: Any) -> bytes:
    """The message shortcut ("Judge this answer") as Slack posts it: form-encoded `payload=`."""
    return payload_body(message_action_payload(message, **kwargs))


def block_actions_payload(
    action_id: str,
    value: str,
    *,
    user_id: str = "U_ASKER",
    channel_id: str = "C_ALERTS",
    message_ts: str = "1700000000.000100",
    block_id: str = "actions",
    response_url: str = "https://hooks.slack.com/actions/T/1/x",
    trigger_id: str = TRIGGER_ID,
    view: dict[str, Any] | None = None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "type": "block_actions",
        "team": {"id": TEAM_ID, "domain": "example"},
        "user": {"id": user_id, "username": "ana", "team_id": TEAM_ID},
        "api_app_id": "A_RELMON",
        "token": "verification-token-unused",
        "trigger_id": trigger_id,
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": block_id,
                "value": value,
                "text": {"type": "plain_text", "text": action_id},
                "action_ts": str(time.time()),
            }
        ],
    }
    if view is not None:
        payload["container"] = {"type": "view", "view_id": view.get("id", "V1")}
        payload["view"] = view
    else:
        payload["container"] = {"type": "message", "message_ts": message_ts, "channel_id": channel_id}
        payload["channel"] = {"id": channel_id, "name": "alerts"}
        payload["message"] = {"type": "message", "ts": message_ts, "text": "", "bot_id": "B_RELMON"}
    return payload


def block_actions(action_id: str, value: str, **kwargs: Any) -> bytes:
    return payload_body(block_actions_payload(action_id, value, **kwargs))


def view_submission_payload(
    *, question: str, answer: str, judge: str = "relevancy", callback_id: str = "judge_modal", user_id: str = "U_ASKER"
) -> dict[str, Any]:
    """The /judge modal submitted, as Slack posts it (form-encoded `payload=`)."""

    def text(value: str) -> dict[str, Any]:
        return {"value": {"type": "plain_text_input", "value": value}}

    return {
        "type": "view_submission",
        "team": {"id": TEAM_ID, "domain": "example"},
        "user": {"id": user_id, "username": "ana", "team_id": TEAM_ID},
        "api_app_id": "A_RELMON",
        "token": "verification-token-unused",
        "trigger_id": "1.2.3",
        "view": {
            "id": "V123",
            "type": "modal",
            "callback_id": callback_id,
            "private_metadata": json.dumps({"channel_id": "C_SUPPORT", "response_url": None}),
            "state": {
                "values": {
                    "question": text(question),
                    "answer": text(answer),
                    "judge": {"value": {"type": "static_select", "selected_option": {"value": judge}}},
                }
            },
        },
        "response_urls": [],
    }
