"""Requests to `POST /slack/events` checked before Bolt sees them, so bad input gets a 4xx and never a 500 that
Slack would retry: size (413), signature and timestamp (401), content type (415), body shape (400).
`payload_problem` is the shape check alone, which Socket Mode's payloads (`bot.socket_mode`) go through too."""

from __future__ import annotations

import json
import re
import time
from urllib.parse import parse_qs

from slack_sdk.signature import SignatureVerifier

MAX_BODY_BYTES = 1024 * 1024
MAX_CLOCK_SKEW_SECONDS = 300  # Slack's own rule: reject requests older than 5 minutes
FORM = "application/x-www-form-urlencoded"
JSON = "application/json"


class BadRequest(Exception):
    def __init__(self, status: int, reason: str, *, no_retry: bool = True) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.no_retry = no_retry


# Fields of a message event (and of the messages nested in it) as Slack sends them: anything else is not from Slack,
# and would make the capture listener fail with a 500 that Slack retries for nothing.
_MESSAGE_STRINGS = (
    "channel", "user", "bot_id", "app_id", "text", "ts", "thread_ts", "subtype", "deleted_ts", "channel_type",
    "event_ts", "team", "username", "parent_user_id", "streaming_state",
)  # fmt: skip
_MESSAGE_OBJECTS = ("message", "previous_message", "root", "bot_profile", "edited")
_MESSAGE_LISTS = ("blocks", "attachments", "files")


_MESSAGE_TIMESTAMPS = ("ts", "thread_ts", "deleted_ts", "event_ts")
# Slack IDs are about a dozen characters; the database keeps up to 32 (store.models).
MAX_ID_LENGTH = 32
_MESSAGE_IDS = ("channel", "user", "bot_id", "app_id", "team", "parent_user_id")
_PAYLOAD_IDS = frozenset({"team_id", "user_id", "channel_id", "api_app_id", "enterprise_id", "id", "user_team"})
_SLACK_TS = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?")


def message_shape_error(message: dict, *, nested: bool = False) -> str | None:
    """Why a message event (or a message inside one) cannot be from Slack, or None."""
    for name in _MESSAGE_STRINGS:
        if message.get(name) is not None and not isinstance(message[name], str):
            return f"{name} must be a string"
    for name in _MESSAGE_IDS:
        if message.get(name) is not None and len(message[name]) > MAX_ID_LENGTH:
            return f"{name} is too long for a Slack ID"
    for name in _MESSAGE_TIMESTAMPS:
        if message.get(name) is not None and not _SLACK_TS.fullmatch(message[name]):
            return f"{name} must be a Slack timestamp"
    for name in _MESSAGE_OBJECTS:
        value = message.get(name)
        if value is None:
            continue
        if not isinstance(value, dict):
            return f"{name} must be an object"
        inner = None if nested else message_shape_error(value, nested=True)
        if inner:
            return f"{name}.{inner}"
    for name in _MESSAGE_LISTS:
        value = message.get(name)
        if value is not None and not (isinstance(value, list) and all(isinstance(item, dict) for item in value)):
            return f"{name} must be a list of objects"
    return None


# Fields Bolt reads from any payload (to route it and to build its context) with the type it assumes.
_PAYLOAD_STRINGS = frozenset(
    {
        "type", "callback_id", "trigger_id", "response_url", "api_app_id", "team_id", "enterprise_id", "user_id",
        "channel_id", "event_id", "command", "thread_ts", "action_ts", "message_ts", "context_team_id",
        "context_enterprise_id", "id", "action_id", "block_id", "user_team", "app_installed_team_id",
    }
)  # fmt: skip
_PAYLOAD_OBJECTS = frozenset(
    {"view", "container", "message", "previous_message", "event", "item", "assistant_thread", "state", "submission"}
)
_PAYLOAD_OBJECT_OR_STRING = frozenset({"user", "channel", "team", "enterprise"})
_PAYLOAD_LISTS = frozenset({"authorizations", "actions", "response_urls"})


def payload_shape_error(payload: dict, *, depth: int = 0) -> str | None:
    """Why a payload's routing fields (and those of the objects inside it, two levels down) are not the types
    Slack sends and Bolt assumes, or None."""
    for key, value in payload.items():
        if value is None and key not in _PAYLOAD_OBJECTS | _PAYLOAD_LISTS:
            continue
        if key in _PAYLOAD_STRINGS and not isinstance(value, str):
            return f"{key} must be a string"
        if key in _PAYLOAD_IDS and len(value) > MAX_ID_LENGTH:
            return f"{key} is too long for a Slack ID"
        if key in _PAYLOAD_OBJECTS and not isinstance(value, dict):
            return f"{key} must be an object"
        if key in _PAYLOAD_OBJECT_OR_STRING and not isinstance(value, (dict, str)):
            return f"{key} must be an object or a string"
        if key in _PAYLOAD_LISTS and not (isinstance(value, list) and all(isinstance(v, dict) for v in value)):
            return f"{key} must be a list of objects"
        if key == "actions" and not value:  # Bolt routes block actions on actions[0]
            return "actions must not be empty"
        if depth < 2 and key in _PAYLOAD_OBJECTS | _PAYLOAD_OBJECT_OR_STRING | _PAYLOAD_LISTS:
            for inner in value if isinstance(value, list) else [value]:
                problem = payload_shape_error(inner, depth=depth + 1) if isinstance(inner, dict) else None
                if problem:
                    return f"{key}.{problem}"
    return None


def _has_unstorable_text(value: object) -> bool:
    """NUL characters and lone surrogates: valid JSON escapes that no database text column (nor UTF-8) takes."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
            try:
                item.encode("utf-8")  # fails on a lone surrogate (C speed, even for a megabyte)
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


# What relmon's listeners and Bolt's matchers index without looking, per payload: paths that must hold a non-empty
# string. Interactive payloads of other types (legacy attachments, dialogs, workflow steps) relmon never asks for.
_INTERACTIVE_NEEDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "block_actions": (("user", "id"),),
    "block_suggestion": (("action_id",), ("user", "id")),
    "message_action": (("callback_id",), ("user", "id")),
    "shortcut": (("callback_id",), ("user", "id")),
    "view_submission": (("view", "callback_id"), ("view", "type"), ("user", "id")),
    "view_closed": (("view", "callback_id"), ("view", "type"), ("user", "id")),
}
_ACTION_NEEDS = (("action_id",), ("type",))
_COMMAND_NEEDS = (("command",), ("user_id",), ("channel_id",), ("trigger_id",))
_EVENT_NEEDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "app_home_opened": (("user",),),
    "member_joined_channel": (("channel",), ("user",)),
    "member_left_channel": (("channel",), ("user",)),
}


def _missing(payload: dict, needs: tuple[tuple[str, ...], ...]) -> str | None:
    for path in needs:
        value: object = payload
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if not isinstance(value, str) or not value:
            return f"{'.'.join(path)} is required"
    return None


def _envelope_problem(payload: dict) -> str | None:
    if not isinstance(payload.get("type"), str):
        return "an object with a type is required"
    if payload["type"] == "url_verification" and not isinstance(payload.get("challenge"), str):
        return "url_verification without a challenge"
    if payload["type"] != "event_callback":
        return None
    event = payload.get("event")
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        return "event_callback without an event"
    if event["type"] == "message":
        problem = message_shape_error(event)
        return f"message event: {problem}" if problem else None
    return _missing(event, _EVENT_NEEDS.get(event["type"], ()))


def _interactive_problem(payload: dict) -> str | None:
    needs = _INTERACTIVE_NEEDS.get(payload.get("type"))  # type: ignore[arg-type]
    if needs is None:
        return "payload type not handled"
    problem = _missing(payload, needs)
    if problem is None and payload["type"] == "block_actions":
        if not payload.get("actions"):
            return "actions are required"
        problem = next(filter(None, (_missing(action, _ACTION_NEEDS) for action in payload["actions"])), None)
        problem = f"actions.{problem}" if problem else None
    return problem


def payload_problem(kind: str, payload: object) -> str | None:
    """Why a parsed request cannot be dispatched safely, or None. `kind`: events (an Events API envelope),
    interactive (a `payload=` form field) or command (a slash command's fields)."""
    if not isinstance(payload, dict):
        return "an object is required"
    if _has_unstorable_text(payload):
        return "holds NUL characters or lone surrogates"
    problem = payload_shape_error(payload)
    if problem is None and kind == "events":
        problem = _envelope_problem(payload)
    elif problem is None and kind == "interactive":
        problem = _interactive_problem(payload)
    elif problem is None:
        problem = _missing(payload, _COMMAND_NEEDS)
    return problem


def _parsed(kind: str, text: str) -> dict:
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser allows
        raise BadRequest(400, f"malformed {kind} JSON") from None
    problem = payload_problem(kind, payload)
    if problem:
        raise BadRequest(400, f"malformed {kind} JSON: {problem}")
    return payload


def check_shape(content_type: str, body: bytes) -> None:
    """Raise BadRequest unless the body is something Bolt can dispatch without failing."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(400, "body is not UTF-8") from None
    if content_type == JSON:
        _parsed("events", text)
        return
    form = parse_qs(text, keep_blank_values=True)
    if "payload" in form:
        _parsed("interactive", form["payload"][-1])
        return
    if not form.get("command"):
        raise BadRequest(400, "form body is neither a payload nor a slash command")
    problem = payload_problem("command", {key: values[-1] for key, values in form.items()})
    if problem:
        raise BadRequest(400, f"malformed slash command: {problem}")


# Only ASCII digits: str.isdigit() and int() also take other scripts' digits ('٣', '３'), and isdigit() takes '²'.
_ASCII_NUMBER = re.compile(r"[0-9]{1,18}")


def checked_body(environ: dict, verifier: SignatureVerifier) -> bytes:
    """The request body, once its size, signature, timestamp, content type and shape passed; else BadRequest."""
    length_header = environ.get("CONTENT_LENGTH") or ""
    if not _ASCII_NUMBER.fullmatch(length_header):
        raise BadRequest(411, "Content-Length required")
    length = int(length_header)
    if length > MAX_BODY_BYTES:
        raise BadRequest(413, "body too large")
    body = environ["wsgi.input"].read(length)
    if len(body) != length:
        raise BadRequest(400, "body shorter than its Content-Length")
    timestamp = environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP", "")
    signature = environ.get("HTTP_X_SLACK_SIGNATURE", "")
    if not timestamp or not signature:
        raise BadRequest(401, "missing signature")
    if not _ASCII_NUMBER.fullmatch(timestamp) or abs(time.time() - int(timestamp)) > MAX_CLOCK_SKEW_SECONDS:
        raise BadRequest(401, "stale or invalid timestamp")
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(400, "body is not UTF-8") from None
    if not verifier.is_valid(body=body, timestamp=timestamp, signature=signature):
        raise BadRequest(401, "invalid signature")
    content_type = (environ.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
    if content_type not in (JSON, FORM):
        raise BadRequest(415, "content type must be JSON or form-encoded")
    check_shape(content_type, body)
    return body
