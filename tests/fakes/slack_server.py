"""A local Slack Web API server for tests and benches: slack_sdk talks to it over real HTTP.

    with FakeSlack() as slack:
        client = WebClient(token="xoxb-test", base_url=slack.api_url)
        slack.add_user("U1", "ana", "Ana Diaz")
        client.users_info(user="U1")
        assert slack.calls_to("users.info") == [{"user": "U1"}]

Every call is recorded (`.calls`); state covers users, conversations, chat, files, views, auth and bots.
`rate_limit(method, times, retry_after)` makes the next calls answer 429 with Retry-After; `refuse(method, error,
times)` makes them answer an error (`missing_scope` by default, with `needed` and `provided` as Slack sends).
`response_url(key)` gives a URL whose posts land in `.responses[key]` (slash commands, shortcuts);
`rate_limit_response_url(key, times, retry_after)` makes its next posts answer 429 with Retry-After, and
`expire_response_url(key)` makes it answer 404 `expired_url` (as after 30 minutes or 5 posts),
`slow_response_url(key, seconds)` takes its posts but answers them only that much later, and
`drop_response_url(key, times)` takes its next posts and closes the connection without an answer.
`.response_attempts[key]` keeps the time of every post, taken or refused; `.response_answers[key]` counts the
taken posts answered (or closed unanswered), a late answer once it went out: the sign a test waits for.
`slow_method(method, seconds, times)` carries out the next calls to a Web API method at once but answers them
only that much later (after the client's timeout, say), and `drop_method(method, times)` carries them out and
closes the connection without an answer: Slack did it, the client never hears.
chat.postEphemeral to a known channel answers `user_not_in_channel` when the user is not a member.
chat.postMessage and chat.update answer `msg_blocks_too_long` when the text of all their blocks together is longer
than `.max_blocks_text` characters (12,000 by default, as Slack; None: no limit).
`apps.connections.open` (app-level xapp- tokens only) answers `socket_mode_url`, e.g. a FakeSocketMode's `.url`.
Runnable alone: `python -m tests.fakes.slack_server --port N`.
"""

from __future__ import annotations

import base64
import itertools
import json
import threading
import time
from collections import defaultdict
from contextlib import suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.background import BackgroundServer, QuietHandler, serve_from_command_line

TEAM_ID = "T_TEST"
RELMON_USER_ID = "U_RELMON"
RELMON_BOT_ID = "B_RELMON"
RELMON_APP_ID = "A_RELMON"


@dataclass
class Channel:
    id: str
    name: str
    is_private: bool = False
    members: list[str] = field(default_factory=list)
    is_ext_shared: bool = False
    is_org_shared: bool = False  # shared across an Enterprise Grid organisation's workspaces


class FakeSlack(BackgroundServer):
    """A Slack Web API on 127.0.0.1 (a free port), served from a background thread."""

    thread_name = "fake-slack"
    poll_interval = 0.05

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, socket_mode_url: str | None = None) -> None:
        self._lock = threading.RLock()
        # What apps.connections.open answers (tests.fakes.socket_mode_server); None: Socket Mode is off.
        self.socket_mode_url = socket_mode_url
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.users: dict[str, dict[str, Any]] = {}
        self.bots: dict[str, dict[str, Any]] = {}
        self.usergroups: dict[str, list[str]] = {}
        self.channels: dict[str, Channel] = {}
        self.messages: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)  # channel -> ts -> message
        self.ephemerals: list[dict[str, Any]] = []
        self.views: list[dict[str, Any]] = []  # every opened, updated or published view, in order
        self.published: dict[str, dict[str, Any]] = {}  # user_id -> last published home view
        self.uploads: dict[str, bytes] = {}  # file_id -> bytes posted to its upload URL
        self.files: dict[str, dict[str, Any]] = {}  # file_id -> metadata, once completed
        self.responses: dict[str, list[Any]] = defaultdict(list)  # response_url key -> posted bodies
        self._rate_limits: dict[str, list[int]] = {}  # method -> [remaining, retry_after]
        self._refusals: dict[str, list] = {}  # method -> [remaining, error]
        self.response_attempts: dict[str, list[float]] = defaultdict(list)  # response_url key -> post times
        self.response_answers: dict[str, int] = defaultdict(int)  # response_url key -> taken posts answered
        self._response_limits: dict[str, list[int]] = {}  # response_url key -> [remaining, retry_after]
        self._expired_responses: set[str] = set()
        self._response_delays: dict[str, float] = {}  # response_url key -> seconds before the answer
        self._response_drops: dict[str, int] = {}  # response_url key -> posts taken but left unanswered
        self._method_faults: dict[str, list] = {}  # Web API method -> [remaining, seconds before the answer, drop]
        self.archived: set[str] = set()  # channels that refuse posts with is_archived
        # As Slack does: every API answer names the token's scopes in `x-oauth-scopes` (None: header left out).
        self.oauth_scopes: list[str] | None = None
        # When set, any other token gets `invalid_auth` (None: every token is accepted).
        self.valid_tokens: set[str] | None = None
        self.max_blocks_text: int | None = 12_000
        self._ts_counter = itertools.count(1)
        self._id_counter = itertools.count(1)
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None
        self.add_user(RELMON_USER_ID, "relmon", "relmon", is_bot=True, bot_id=RELMON_BOT_ID)
        self.add_bot(RELMON_BOT_ID, "relmon", app_id=RELMON_APP_ID, user_id=RELMON_USER_ID)

    # Life cycle -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/"

    # State set-up -----------------------------------------------------------------------------

    def add_user(
        self, user_id: str, name: str, real_name: str | None = None, *, is_bot: bool = False, bot_id: str | None = None
    ) -> None:
        with self._lock:
            profile = {"real_name": real_name or name, "display_name": name}
            if bot_id:
                profile["bot_id"] = bot_id
            self.users[user_id] = {
                "id": user_id,
                "team_id": TEAM_ID,
                "name": name,
                "real_name": real_name or name,
                "is_bot": is_bot,
                "deleted": False,
                "profile": profile,
            }

    def add_usergroup(self, group_id: str, members: list[str]) -> None:
        with self._lock:
            self.usergroups[group_id] = list(members)

    def add_bot(self, bot_id: str, name: str, *, app_id: str | None = None, user_id: str | None = None) -> None:
        with self._lock:
            self.bots[bot_id] = {"id": bot_id, "name": name, "app_id": app_id, "user_id": user_id, "deleted": False}

    def add_channel(
        self,
        channel_id: str,
        name: str,
        is_private: bool = False,
        members: list[str] | None = None,
        *,
        is_ext_shared: bool = False,
        is_org_shared: bool = False,
    ) -> None:
        with self._lock:
            self.channels[channel_id] = Channel(
                channel_id, name, is_private, list(members or []), is_ext_shared, is_org_shared
            )

    def add_message(
        self,
        channel: str,
        ts: str,
        user: str | None = None,
        text: str = "",
        thread_ts: str | None = None,
        *,
        bot_id: str | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        message: dict[str, Any] = {"type": "message", "ts": ts, "text": text, **extra}
        if user:
            message["user"] = user
        if bot_id:
            message["bot_id"] = bot_id
        if thread_ts:
            message["thread_ts"] = thread_ts
        with self._lock:
            self.messages[channel][ts] = message
        return message

    def refuse(self, method: str, error: str = "missing_scope", times: int = 1_000_000) -> None:
        """The next `times` calls to `method` answer `{"ok": false, "error": error}` as Slack does (a missing scope
        names the scope needed and those the token has)."""
        with self._lock:
            self._refusals[method] = [times, error]

    def rate_limit(self, method: str, times: int = 1, retry_after: int = 1) -> None:
        """The next `times` calls to `method` answer 429 with this Retry-After (seconds)."""
        with self._lock:
            self._rate_limits[method] = [times, retry_after]

    def response_url(self, key: str) -> str:
        return f"{self.base_url}/response/{key}"

    def rate_limit_response_url(self, key: str, times: int = 1, retry_after: int = 1) -> None:
        """The next `times` posts to response_url(key) answer 429 with this Retry-After (seconds)."""
        with self._lock:
            self._response_limits[key] = [times, retry_after]

    def expire_response_url(self, key: str) -> None:
        """From now on response_url(key) answers 404 `expired_url`, as Slack does after 30 minutes."""
        with self._lock:
            self._expired_responses.add(key)

    def slow_response_url(self, key: str, seconds: float) -> None:
        """From now on response_url(key) takes each post at once but answers it `seconds` later."""
        with self._lock:
            self._response_delays[key] = seconds

    def drop_response_url(self, key: str, times: int = 1) -> None:
        """The next `times` posts to response_url(key) are taken, then the connection is closed unanswered."""
        with self._lock:
            self._response_drops[key] = times

    def slow_method(self, method: str, seconds: float, times: int = 1) -> None:
        """The next `times` calls to `method` are carried out at once but answered `seconds` later."""
        with self._lock:
            self._method_faults[method] = [times, seconds, False]

    def drop_method(self, method: str, times: int = 1) -> None:
        """The next `times` calls to `method` are carried out, then the connection is closed unanswered."""
        with self._lock:
            self._method_faults[method] = [times, 0.0, True]

    def _method_answer(self, method: str) -> tuple[float, bool]:
        """For a call just carried out: (seconds before the answer, whether to close without answering)."""
        with self._lock:
            fault = self._method_faults.get(method)
            if not fault or fault[0] <= 0:
                return 0.0, False
            fault[0] -= 1
            return fault[1], fault[2]

    def _response_answer(self, key: str) -> tuple[float, bool]:
        """For a post just taken: (seconds before the answer, whether to close without answering)."""
        with self._lock:
            dropped = self._response_drops.get(key, 0) > 0
            if dropped:
                self._response_drops[key] -= 1
            return self._response_delays.get(key, 0.0), dropped

    def _response_fault(self, key: str) -> tuple[int, str, dict[str, str]] | None:
        """(status, body, headers) when this post to response_url(key) is refused; None: take it."""
        with self._lock:
            self.response_attempts[key].append(time.monotonic())
            if key in self._expired_responses:
                return 404, "expired_url", {}
            limit = self._response_limits.get(key)
            if limit and limit[0] > 0:
                limit[0] -= 1
                return 429, "rate_limited", {"Retry-After": str(limit[1])}
        return None

    # Inspection -------------------------------------------------------------------------------

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        with self._lock:
            return [params for name, params in self.calls if name == method]

    def posted(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Messages posted with chat.postMessage (optionally to one channel), in order."""
        return [p for p in self.calls_to("chat.postMessage") if channel is None or p.get("channel") == channel]

    def reset_calls(self) -> None:
        with self._lock:
            self.calls.clear()

    def wait_for(self, method: str, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Wait until `method` has been called at least `count` times; return its calls."""
        deadline = time.monotonic() + timeout
        while True:
            calls = self.calls_to(method)
            if len(calls) >= count or time.monotonic() > deadline:
                return calls
            time.sleep(0.02)

    # The API ------------------------------------------------------------------------------------

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts_counter):06d}"

    def _take_rate_limit(self, method: str) -> int | None:
        with self._lock:
            limit = self._rate_limits.get(method)
            if not limit or limit[0] <= 0:
                return None
            limit[0] -= 1
            return limit[1]

    def handle(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """Answer one API call (already recorded and authenticated)."""
        with self._lock:
            refusal = self._refusals.get(method)
            if refusal and refusal[0] > 0:
                refusal[0] -= 1
                if refusal[1] == "missing_scope":
                    return {"ok": False, "error": "missing_scope", "needed": "groups:read", "provided": "channels:read"}
                return {"ok": False, "error": refusal[1]}
        handler = getattr(self, "_api_" + method.replace(".", "_"), None)
        if handler is None:
            return {"ok": False, "error": "unknown_method"}
        limit = self.max_blocks_text if method in ("chat.postMessage", "chat.update") else None
        if limit is not None and _blocks_text(_maybe_json(params.get("blocks"))) > limit:
            return {"ok": False, "error": "msg_blocks_too_long"}
        with self._lock:
            return handler(params)

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

    def archive_channel(self, channel: str) -> None:
        """Posts to `channel` are refused from now on (`is_archived`), as Slack does for an archived channel."""
        with self._lock:
            self.archived.add(channel)

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
                message[key] = _maybe_json(params[key])
        self.messages[channel][ts] = message
        return {"ok": True, "channel": channel, "ts": ts, "message": message}

    def _api_chat_update(self, params: dict) -> dict:
        channel, ts = params.get("channel", ""), params.get("ts", "")
        message = self.messages.get(channel, {}).get(ts)
        if message is None:
            return {"ok": False, "error": "message_not_found"}
        for key in ("text", "blocks", "attachments"):
            if params.get(key) is not None:
                message[key] = _maybe_json(params[key])
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
        file_id = f"F{next(self._id_counter):08d}"
        return {"ok": True, "upload_url": f"{self.base_url}/upload/{file_id}", "file_id": file_id}

    def _api_files_completeUploadExternal(self, params: dict) -> dict:
        files = _maybe_json(params.get("files", "[]"))
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
            self.files[file_id] = record
            completed.append(record)
        if params.get("channel_id"):  # as Slack does: the shared files show as a message (in the thread, if given)
            self.add_message(
                params["channel_id"], self._next_ts(), RELMON_USER_ID, params.get("initial_comment") or "",
                params.get("thread_ts"), bot_id=RELMON_BOT_ID, subtype="file_share", files=completed,
            )  # fmt: skip
        return {"ok": True, "files": completed}

    def _view(self, params: dict, kind: str) -> dict:
        view = _maybe_json(params.get("view", "{}"))
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

    # HTTP -------------------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(QuietHandler):
            def _send(self, status: int, body: dict | str, headers: dict[str, str] | None = None) -> None:
                data = (json.dumps(body) if isinstance(body, dict) else body).encode()
                content_type = "application/json; charset=utf-8" if isinstance(body, dict) else "text/plain"
                self.send_body(status, data, content_type, headers)

            def do_GET(self) -> None:
                self._dispatch(b"")

            def do_POST(self) -> None:
                self._dispatch(self.read_body())

            def _dispatch(self, body: bytes) -> None:
                parts = urlsplit(self.path)
                if parts.path.startswith("/upload/"):
                    file_id = parts.path.removeprefix("/upload/")
                    with fake._lock:
                        fake.uploads[file_id] = body
                    self._send(200, f"OK - {len(body)}")
                    return
                if parts.path.startswith("/response/"):
                    key = parts.path.removeprefix("/response/")
                    fault = fake._response_fault(key)
                    if fault is not None:
                        self._send(*fault)
                        return
                    with suppress(ValueError):
                        body = json.loads(body)
                    with fake._lock:
                        fake.responses[key].append(body)
                    delay, dropped = fake._response_answer(key)
                    try:
                        if dropped:
                            self.close_connection = True  # taken, no answer: the client sees the connection close
                            return
                        time.sleep(delay)
                        with suppress(OSError):  # a client that stopped waiting has closed its end
                            self._send(200, {"ok": True})
                    finally:
                        with fake._lock:
                            fake.response_answers[key] += 1
                    return
                if not parts.path.startswith("/api/"):
                    self._send(404, {"ok": False, "error": "not_found"})
                    return
                method = parts.path.removeprefix("/api/")
                try:
                    params = _parse_params(self.headers.get("Content-Type", ""), body, parts.query)
                except ValueError:
                    self._send(200, {"ok": False, "error": "invalid_form_data"})
                    return
                token = params.pop("token", None)
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Bearer "):
                    token = auth.removeprefix("Bearer ")
                with fake._lock:
                    fake.calls.append((method, params))
                if method != "api.test" and not token:
                    self._send(200, {"ok": False, "error": "not_authed"})
                    return
                if method != "api.test" and fake.valid_tokens is not None and token not in fake.valid_tokens:
                    self._send(200, {"ok": False, "error": "invalid_auth"})
                    return
                if method == "apps.connections.open" and not token.startswith("xapp-"):
                    self._send(200, {"ok": False, "error": "not_allowed_token_type"})  # Slack's answer
                    return
                retry_after = fake._take_rate_limit(method)
                if retry_after is not None:
                    self._send(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)})
                    return
                scopes = fake.oauth_scopes
                answer = fake.handle(method, params)
                delay, dropped = fake._method_answer(method)
                if dropped:
                    self.close_connection = True  # carried out, but no answer: the client sees the connection close
                    return
                time.sleep(delay)
                with suppress(OSError):  # a client that stopped waiting has closed its end
                    self._send(200, answer, {"x-oauth-scopes": ",".join(scopes)} if scopes else None)

        return Handler


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


def _blocks_text(value: Any) -> int:
    """Characters of every `text` string in blocks, at any depth (Slack's total for `msg_blocks_too_long`)."""
    if isinstance(value, list):
        return sum(_blocks_text(item) for item in value)
    if isinstance(value, dict):
        return sum(len(v) if k == "text" and isinstance(v, str) else _blocks_text(v) for k, v in value.items())
    return 0


def _maybe_json(value: Any) -> Any:
    """Form bodies carry blocks and views as JSON strings; JSON bodies carry them as objects."""
    if isinstance(value, str) and value[:1] in ("[", "{"):
        with suppress(ValueError):
            return json.loads(value)
    return value


def _parse_params(content_type: str, body: bytes, query: str) -> dict[str, Any]:
    params: dict[str, Any] = {k: v[-1] for k, v in parse_qs(query).items()}
    if not body:
        return params
    if content_type.startswith("application/json"):
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ValueError("JSON body must be an object")
        params.update(data)
    else:
        params.update({k: v[-1] for k, v in parse_qs(body.decode("utf-8"), keep_blank_values=True).items()})
    return params


def main() -> None:  # pragma: no cover - manual use
    serve_from_command_line(
        lambda port: FakeSlack(port=port), "Serve a fake Slack Web API", lambda fake: f"fake Slack at {fake.api_url}"
    )


if __name__ == "__main__":  # pragma: no cover
    main()
