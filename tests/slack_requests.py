"""Requests shaped as Slack sends them: signing, Events API envelopes, message events of every kind, and a `post`
that sends them signed over real HTTP (or `call_wsgi`, in-process). Slash commands, shortcuts, block actions and
view submissions (form-encoded) are built in tests/slack_interactions.py.

Shapes follow Slack's documentation: modern bot messages carry `bot_id`, a bot `user` and `bot_profile`
with no subtype; classic bots send `subtype: bot_message`; edits arrive as `message_changed`.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import itertools
import json
import time
from typing import Any

import httpx

TEAM_ID = "T_TEST"
_event_ids = itertools.count(1)
_ts_counter = itertools.count(1)


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Slack's v0 request signature headers for this body."""
    timestamp = int(time.time()) if timestamp is None else int(timestamp)
    base = b"v0:" + str(timestamp).encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": f"v0={digest}"}


def next_ts(base: float | None = None) -> str:
    """A unique Slack-style ts ("seconds.micro"), increasing within the process."""
    seconds = int(base if base is not None else time.time())
    return f"{seconds}.{next(_ts_counter):06d}"


# Events API ---------------------------------------------------------------------------------------

# relmon's identity as the bot's Bolt authorization finds it (the fake Slack's auth.test), as the capture listener
# hands it to the worker with each event.
RELMON_IDENTITY = {"user_id": "U_RELMON", "bot_id": "B_RELMON", "app_id": "A_RELMON"}


def envelope(event: dict[str, Any], *, event_id: str | None = None, team_id: str = TEAM_ID) -> dict[str, Any]:
    return {
        "token": "verification-token-unused",
        "team_id": team_id,
        "api_app_id": "A_RELMON",
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{next(_event_ids):010d}",
        "event_time": int(time.time()),
        "authorizations": [{"team_id": team_id, "user_id": "U_RELMON", "is_bot": True}],
        "is_ext_shared_channel": False,
    }


def url_verification(challenge: str = "challenge-xyz") -> dict[str, Any]:
    return {"token": "verification-token-unused", "challenge": challenge, "type": "url_verification"}


def _channel_type(channel: str) -> str:
    return "group" if channel.startswith("G") else "channel"


def human_message(
    channel: str, ts: str, text: str, *, user: str = "U_ASKER", thread_ts: str | None = None, **extra: Any
) -> dict[str, Any]:
    event: dict[str, Any] = {
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "team": TEAM_ID,
        "channel_type": _channel_type(channel),
        "client_msg_id": f"cm-{ts}",
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
        event["parent_user_id"] = extra.pop("parent_user_id", user)
    event.update(extra)
    return event


def reaction(
    message: dict[str, Any], emoji: str, *, user: str = "U_ASKER", added: bool = True, event_ts: str | None = None
) -> dict[str, Any]:
    """reaction_added / reaction_removed on a message."""
    return {
        "type": "reaction_added" if added else "reaction_removed",
        "user": user,
        "reaction": emoji,
        "item_user": message.get("user"),
        "item": {"type": "message", "channel": message["channel"], "ts": message["ts"]},
        "event_ts": event_ts or next_ts(),
    }


def bot_message(
    channel: str,
    ts: str,
    text: str,
    *,
    bot_id: str = "B_SUPPORT",
    app_id: str = "A_SUPPORT",
    user: str = "U_SUPPORT",
    name: str = "Support Bot",
    thread_ts: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A modern bot message: bot_id, a bot user and bot_profile, no subtype."""
    event: dict[str, Any] = {
        "type": "message",
        "channel": channel,
        "user": user,
        "bot_id": bot_id,
        "app_id": app_id,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "team": TEAM_ID,
        "channel_type": _channel_type(channel),
        "bot_profile": {"id": bot_id, "app_id": app_id, "name": name, "deleted": False, "team_id": TEAM_ID},
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    event.update(extra)
    return event


def classic_bot_message(
    channel: str, ts: str, text: str, *, bot_id: str = "B_CLASSIC", thread_ts: str | None = None, **extra: Any
) -> dict[str, Any]:
    """A classic app's message: subtype bot_message, bot_id and username, no user."""
    event: dict[str, Any] = {
        "type": "message",
        "subtype": "bot_message",
        "channel": channel,
        "bot_id": bot_id,
        "username": "classic-bot",
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "channel_type": _channel_type(channel),
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    event.update(extra)
    return event


def thread_broadcast(message: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """A reply also sent to the channel: subtype thread_broadcast with the thread's root."""
    event = dict(message, subtype="thread_broadcast", thread_ts=root["ts"])
    event["root"] = {k: v for k, v in root.items() if k not in ("channel", "event_ts", "channel_type")}
    return event


def streaming(message: dict[str, Any], state: str) -> dict[str, Any]:
    """A bot message with `streaming_state` (in_progress, completed or errored)."""
    return dict(message, streaming_state=state)


def message_changed(previous: dict[str, Any], new_text: str | None = None, **changes: Any) -> dict[str, Any]:
    """An edit of `previous`: message_changed with the new version in `message`."""
    event_ts = next_ts()
    inner_keys = ("channel", "event_ts", "channel_type")
    old = {k: v for k, v in previous.items() if k not in inner_keys}
    new = dict(old, **changes)
    if new_text is not None:
        new["text"] = new_text
    new["edited"] = {"user": previous.get("user") or previous.get("bot_id"), "ts": event_ts}
    return {
        "type": "message",
        "subtype": "message_changed",
        "hidden": True,
        "channel": previous["channel"],
        "channel_type": previous.get("channel_type", _channel_type(previous["channel"])),
        "message": new,
        "previous_message": old,
        "ts": event_ts,
        "event_ts": event_ts,
    }


def message_deleted(previous: dict[str, Any]) -> dict[str, Any]:
    event_ts = next_ts()
    return {
        "type": "message",
        "subtype": "message_deleted",
        "hidden": True,
        "channel": previous["channel"],
        "channel_type": previous.get("channel_type", _channel_type(previous["channel"])),
        "deleted_ts": previous["ts"],
        "previous_message": {k: v for k, v in previous.items() if k not in ("channel", "event_ts", "channel_type")},
        "ts": event_ts,
        "event_ts": event_ts,
    }


def file_share(message: dict[str, Any], name: str = "report.pdf", title: str | None = None) -> dict[str, Any]:
    """A message with a shared file (subtype file_share, as Slack sends uploads with a message)."""
    file = {
        "id": f"F{message['ts'].replace('.', '')}",
        "name": name,
        "title": title or name,
        "mimetype": "application/pdf",
        "filetype": "pdf",
        "permalink": f"https://example.slack.com/files/{name}",
    }
    return dict(message, subtype="file_share", files=[file], upload=False)


def rich_text_blocks(*elements: dict[str, Any]) -> list[dict[str, Any]]:
    """Blocks as Slack's composer builds them: one rich_text block with the given elements."""
    return [{"type": "rich_text", "block_id": "rt1", "elements": list(elements)}]


def rich_section(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"type": "rich_text_section", "elements": list(parts)}


def text_part(text: str, **style: bool) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "text", "text": text}
    if style:
        part["style"] = style
    return part


# Sending ------------------------------------------------------------------------------------------


def call_wsgi(
    app: Any, body: bytes, content_type: str, headers: dict[str, str], content_length: str | None = None
) -> tuple[int, bytes]:
    """One POST /slack/events handed straight to a WSGI app, in-process (no socket): (status, body)."""
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/slack/events",
        "QUERY_STRING": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(body),
        "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(len(body)) if content_length is None else content_length,
    }
    for name, value in headers.items():
        environ["HTTP_" + name.upper().replace("-", "_")] = value
    started: list[str] = []
    answer = b"".join(app(environ, lambda status, _headers, _exc=None: started.append(status)))
    return int(started[0].split()[0]), answer


def body_of(payload: dict[str, Any] | bytes | str) -> tuple[bytes, str]:
    """(raw body, content type) for an event dict (JSON) or an already-encoded form body."""
    if isinstance(payload, dict):
        return json.dumps(payload).encode(), "application/json"
    if isinstance(payload, str):
        payload = payload.encode()
    return payload, "application/x-www-form-urlencoded"


def post(
    url: str,
    body: dict[str, Any] | bytes | str,
    secret: str,
    content_type: str | None = None,
    *,
    headers: dict[str, str] | None = None,
    timestamp: int | None = None,
    timeout: float = 10.0,
    client: httpx.Client | None = None,
) -> httpx.Response:
    """POST a signed request to the bot (a dict is sent as JSON; bytes as a form body)."""
    raw, guessed = body_of(body)
    all_headers = {"Content-Type": content_type or guessed, **sign(raw, secret, timestamp)}
    all_headers.update(headers or {})
    if client is not None:
        return client.post(url, content=raw, headers=all_headers, timeout=timeout)
    return httpx.post(url, content=raw, headers=all_headers, timeout=timeout)
