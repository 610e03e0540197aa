"""The fake Slack's Web API methods (a mixin of FakeSlack, tests/fakes/slack_server.py): one `_api_<method>` per
method (dots as underscores), answering from the fake's state as Slack does, and the paging they share."""

from __future__ import annotations

import base64
import itertools
import json
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from tests.fakes.slack_workspace import RELMON_BOT_ID, RELMON_USER_ID, TEAM_ID, Channel

ALT_TXT_CHARS = 1000  # files.getUploadURLExternal refuses a longer alt_txt (alt_txt_too_large)


class SlackMethods:
    """The Web API methods of FakeSlack, called under its lock; the attributes below are set by FakeSlack.__init__."""

    socket_mode_url: str | None
    base_url: str
    users: dict[str, dict[str, Any]]
    bots: dict[str, dict[str, Any]]
    usergroups: dict[str, list[str]]
    usergroup_handles: dict[str, str]
    channels: dict[str, Channel]
    messages: dict[str, dict[str, dict[str, Any]]]  # channel -> ts -> message
    ephemerals: list[dict[str, Any]]
    views: list[dict[str, Any]]  # every opened, updated or published view, in order
    published: dict[str, dict[str, Any]]  # user_id -> last published home view
    uploads: dict[str, bytes]  # file_id -> bytes posted to its upload URL
    alt_texts: dict[str, str]  # file_id -> its alt_txt
    files: dict[str, dict[str, Any]]  # file_id -> metadata, once completed
    archived: set[str]  # channels that refuse posts with is_archived
    _ts_counter: itertools.count[int]
    _id_counter: itertools.count[int]
    add_message: Callable[..., dict[str, Any]]

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts_counter):06d}"

    def _api_api_test(self, params: dict) -> dict:
        return {"ok": True, "args": params}

    def _api_auth_test(self, params: dict) -> dict:
        return {
            "ok": True,
            "url": "https://example.slack.com/",
            "team": "Test Team",
            "user": "relmon",
            "team_id": TEAM_ID,
            "user_id": RELMON_USER_ID,
            "bot_id": RELMON_BOT_ID,
            "is_enterprise_install": False,
        }

    def _api_apps_connections_open(self, params: dict) -> dict:
        if self.socket_mode_url is None:
            return {"ok": False, "error": "socket_mode_not_enabled"}
        return {"ok": True, "url": self.socket_mode_url}

    def _api_bots_info(self, params: dict) -> dict:
        bot = self.bots.get(params.get("bot", ""))
        if bot is None:
            return {"ok": False, "error": "bot_not_found"}
        return {"ok": True, "bot": bot}

    def _api_usergroups_users_list(self, params: dict) -> dict:
        members = self.usergroups.get(params.get("usergroup", ""))
        if members is None:
            return {"ok": False, "error": "no_such_subteam"}
        return {"ok": True, "users": members}

    def _api_usergroups_list(self, params: dict) -> dict:
        """Every user group (Slack does not page this one), its members only with `include_users`."""
        with_users = str(params.get("include_users", "")).lower() in ("1", "true")
        groups = [
            {"id": group, "handle": self.usergroup_handles.get(group, group.lower()), "name": group,
             **({"users": list(members)} if with_users else {})}
            for group, members in self.usergroups.items()
        ]  # fmt: skip
        return {"ok": True, "usergroups": groups}

    def _api_users_list(self, params: dict) -> dict:
        """Every user, `limit` a page (Slack's default: all of them at once), paged with `cursor`."""
        users = list(self.users.values())
        start, limit = int(params.get("cursor") or 0), int(params.get("limit") or 0) or len(users) or 1
        after = str(start + limit) if start + limit < len(users) else ""
        return {"ok": True, "members": users[start : start + limit], "response_metadata": {"next_cursor": after}}

    def _api_users_info(self, params: dict) -> dict:
        user = self.users.get(params.get("user", ""))
        if user is None:
            return {"ok": False, "error": "user_not_found"}
        return {"ok": True, "user": user}

    def _channel_json(self, channel: Channel) -> dict:
        return {
            "id": channel.id,
            "name": channel.name,
            "is_channel": not channel.is_private,
            "is_group": channel.is_private,
            "is_private": channel.is_private,
            "is_shared": channel.is_ext_shared or channel.is_org_shared,
            "is_ext_shared": channel.is_ext_shared,
            "is_org_shared": channel.is_org_shared,
            "is_member": RELMON_USER_ID in channel.members,
            "num_members": len(channel.members),
        }

    def _api_conversations_info(self, params: dict) -> dict:
        channel = self.channels.get(params.get("channel", ""))
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        return {"ok": True, "channel": self._channel_json(channel)}

    def _api_conversations_members(self, params: dict) -> dict:
        channel = self.channels.get(params.get("channel", ""))
        if channel is None:
            return {"ok": False, "error": "channel_not_found"}
        return {"ok": True, "members": list(channel.members), "response_metadata": {"next_cursor": ""}}

    def _api_conversations_list(self, params: dict) -> dict:
        return {
            "ok": True,
            "channels": [self._channel_json(c) for c in self.channels.values()],
            "response_metadata": {"next_cursor": ""},
        }

    def _api_users_conversations(self, params: dict) -> dict:
        """Channels `user` (default relmon) is a member of, of `types`, `limit` a page, paged with `cursor`."""
        user, types = params.get("user") or RELMON_USER_ID, str(params.get("types") or "public_channel").split(",")
        mine = [
            c
            for c in self.channels.values()
            if user in c.members and ("private_channel" if c.is_private else "public_channel") in types
        ]
        start, limit = int(params.get("cursor") or 0), int(params.get("limit") or 100)
        after = str(start + limit) if start + limit < len(mine) else ""
        page = [self._channel_json(c) for c in mine[start : start + limit]]
        return {"ok": True, "channels": page, "response_metadata": {"next_cursor": after}}

    def _window(self, messages: list[dict], params: dict) -> list[dict]:
        oldest, latest = params.get("oldest"), params.get("latest")
        inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")

        def inside(ts: str) -> bool:
            value = float(ts)
            if oldest and (value < float(oldest) or (value == float(oldest) and not inclusive)):
                return False
            return not (latest and (value > float(latest) or (value == float(latest) and not inclusive)))

        return [m for m in messages if inside(m["ts"])]

    def _api_conversations_history(self, params: dict) -> dict:
        channel = params.get("channel", "")
        if channel not in self.channels and channel not in self.messages:
            return {"ok": False, "error": "channel_not_found"}
        top = [m for m in self.messages[channel].values() if m.get("thread_ts") in (None, m["ts"])]
        top = sorted(self._window(top, params), key=lambda m: float(m["ts"]), reverse=True)  # newest first
        return _page(top, params, default_limit=100)

    def _api_conversations_replies(self, params: dict) -> dict:
        channel, thread = params.get("channel", ""), params.get("ts", "")
        thread_messages = [
            m for m in self.messages[channel].values() if m["ts"] == thread or m.get("thread_ts") == thread
        ]
        if not thread_messages:
            return {"ok": False, "error": "thread_not_found"}
        root = [m for m in thread_messages if m["ts"] == thread]
        replies = sorted(self._window([m for m in thread_messages if m["ts"] != thread], params), key=_ts_key)
        return _page(root + replies, params, default_limit=1000)

    def _api_chat_postMessage(self, params: dict) -> dict:
        channel = params.get("channel", "")
        if channel in self.archived:
            return {"ok": False, "error": "is_archived"}
        ts = self._next_ts()
        message = {
            "type": "message",
            "ts": ts,
            "text": params.get("text", ""),
            "user": RELMON_USER_ID,
            "bot_id": RELMON_BOT_ID,
        }
        for key in ("blocks", "attachments", "thread_ts", "metadata"):
            if params.get(key) is not None:
                message[key] = maybe_json(params[key])
        self.messages[channel][ts] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _api_chat_update(self, params: dict) -> dict:
        channel, ts = params.get("channel", ""), params.get("ts", "")
        message = self.messages.get(channel, {}).get(ts)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        for key in ("text", "blocks", "attachments"):
            if params.get(key) is not None:
                message[key] = maybe_json(params[key])
        return {"ok": True, "channel": channel, "ts": ts, "text": message.get("text", ""), "message": message}

    def _api_chat_delete(self, params: dict) -> dict:
        channel, ts = params.get("channel", ""), params.get("ts", "")
        if self.messages.get(channel, {}).pop(ts, None) is None:
            return {"ok": False, "error": "message_not_found"}
        return {"ok": True, "channel": channel, "ts": ts}

    def _api_chat_postEphemeral(self, params: dict) -> dict:
        channel = self.channels.get(params.get("channel", ""))
        if channel is not None and params.get("user") not in channel.members:
            return {"ok": False, "error": "user_not_in_channel"}
        self.ephemerals.append(params)
        return {"ok": True, "message_ts": self._next_ts()}

    def _api_chat_getPermalink(self, params: dict) -> dict:
        channel, ts = params.get("channel", ""), params.get("message_ts", "")
        return {
            "ok": True,
            "channel": channel,
            "permalink": f"https://example.slack.com/archives/{channel}/p{ts.replace('.', '')}",
        }

    def _api_files_getUploadURLExternal(self, params: dict) -> dict:
        """As Slack does: the image's description for screen readers comes here (`alt_txt`, at most 1,000
        characters), is kept with the file and shows on it once the upload completes."""
        alt_text = params.get("alt_txt")
        if alt_text is not None and len(alt_text) > ALT_TXT_CHARS:
            return {"ok": False, "error": "alt_txt_too_large"}
        file_id = f"F{next(self._id_counter):08d}"
        if alt_text is not None:
            self.alt_texts[file_id] = alt_text
        return {"ok": True, "upload_url": f"{self.base_url}/upload/{file_id}", "file_id": file_id}

    def _api_files_completeUploadExternal(self, params: dict) -> dict:
        files = maybe_json(params.get("files", "[]"))
        completed = []
        for item in files:
            file_id = item.get("id")
            if file_id not in self.uploads:
                return {"ok": False, "error": "file_not_found"}
            record = {
                "id": file_id,
                "title": item.get("title"),
                "size": len(self.uploads[file_id]),
                "channels": [params["channel_id"]] if params.get("channel_id") else [],
                "initial_comment": params.get("initial_comment"),
                "thread_ts": params.get("thread_ts"),
            }
            if file_id in self.alt_texts:
                record["alt_txt"] = self.alt_texts[file_id]
            self.files[file_id] = record
            completed.append(record)
        if params.get("channel_id"):  # as Slack does: the shared files show as a message (in the thread, if given)
            self.add_message(
                params["channel_id"], self._next_ts(), RELMON_USER_ID, params.get("initial_comment") or "",
                params.get("thread_ts"), bot_id=RELMON_BOT_ID, subtype="file_share", files=completed,
            )  # fmt: skip
        return {"ok": True, "files": completed}

    def _api_files_delete(self, params: dict) -> dict:
        """As Slack does: the file is gone, and a message that shared it shows a tombstone in its place."""
        file_id = params.get("file", "")
        if self.files.pop(file_id, None) is None:
            return {"ok": False, "error": "file_not_found"}
        self.uploads.pop(file_id, None)
        for messages in self.messages.values():
            for message in messages.values():
                if any(shared.get("id") == file_id for shared in message.get("files") or []):
                    message["files"] = [
                        {"id": file_id, "mode": "tombstone"} if shared.get("id") == file_id else shared
                        for shared in message["files"]
                    ]
        return {"ok": True}

    def _view(self, params: dict, kind: str) -> dict:
        view = maybe_json(params.get("view", "{}"))
        view_id = params.get("view_id") or f"V{next(self._id_counter):08d}"
        record = {"id": view_id, "kind": kind, **view}
        self.views.append(record)
        return {"ok": True, "view": record}

    def _api_views_open(self, params: dict) -> dict:
        if not params.get("trigger_id"):
            return {"ok": False, "error": "invalid_trigger_id"}
        return self._view(params, "open")

    def _api_views_update(self, params: dict) -> dict:
        return self._view(params, "update")

    def _api_views_push(self, params: dict) -> dict:
        return self._view(params, "push")

    def _api_views_publish(self, params: dict) -> dict:
        answer = self._view(params, "publish")
        self.published[params.get("user_id", "")] = answer["view"]
        return answer


def _page(messages: list[dict], params: dict, *, default_limit: int) -> dict:
    """One page as Slack pages history and replies: `limit` messages from the opaque `cursor` on, `has_more`,
    and `response_metadata.next_cursor` (empty on the last page)."""
    cursor = str(params.get("cursor") or "")
    start = int(base64.b64decode(cursor).decode().removeprefix("next_ts:")) if cursor else 0
    limit = int(params.get("limit") or default_limit)
    page, more = messages[start : start + limit], start + limit < len(messages)
    after = base64.b64encode(f"next_ts:{start + limit}".encode()).decode() if more else ""
    return {"ok": True, "messages": page, "has_more": more, "response_metadata": {"next_cursor": after}}


def _ts_key(message: dict) -> float:
    return float(message["ts"])


def blocks_text(value: Any) -> int:
    """Characters of every `text` string in blocks, at any depth (Slack's total for `msg_blocks_too_long`)."""
    if isinstance(value, list):
        return sum(blocks_text(item) for item in value)
    if isinstance(value, dict):
        return sum(len(v) if k == "text" and isinstance(v, str) else blocks_text(v) for k, v in value.items())
    return 0


def maybe_json(value: Any) -> Any:
    """Form bodies carry blocks and views as JSON strings; JSON bodies carry them as objects."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        with suppress(ValueError):
            return json.loads(value)
    return value
