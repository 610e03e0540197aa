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
Built from parts: the faults above in tests/fakes/slack_faults.py (SlackFaults), the Web API methods in
tests/fakes/slack_methods.py (SlackMethods), the team, relmon's ids and `Channel` in tests/fakes/slack_workspace.py.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections import defaultdict
from contextlib import suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.background import BackgroundServer, QuietHandler, serve_from_command_line
from tests.fakes.slack_faults import SlackFaults
from tests.fakes.slack_methods import SlackMethods, blocks_text, maybe_json
from tests.fakes.slack_workspace import RELMON_APP_ID, RELMON_BOT_ID, RELMON_USER_ID, TEAM_ID, Channel


class FakeSlack(SlackFaults, SlackMethods, BackgroundServer):
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
        self.usergroup_handles: dict[str, str] = {}  # group ID -> its @handle (usergroups.list)
        self.channels: dict[str, Channel] = {}
        self.messages: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)  # channel -> ts -> message
        self.ephemerals: list[dict[str, Any]] = []
        self.views: list[dict[str, Any]] = []  # every opened, updated or published view, in order
        self.published: dict[str, dict[str, Any]] = {}  # user_id -> last published home view
        self.uploads: dict[str, bytes] = {}  # file_id -> bytes posted to its upload URL
        self.files: dict[str, dict[str, Any]] = {}  # file_id -> metadata, once completed
        self.alt_texts: dict[str, str] = {}  # file_id -> its alt_txt, given when its upload URL was asked for
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
        self,
        user_id: str,
        name: str,
        real_name: str | None = None,
        *,
        is_bot: bool = False,
        bot_id: str | None = None,
        is_admin: bool = False,
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
                "is_admin": is_admin,  # a workspace admin (users.info says is_owner, is_primary_owner beside it)
                "is_owner": False,
                "is_primary_owner": False,
                "deleted": False,
                "profile": profile,
            }

    def add_usergroup(self, group_id: str, members: list[str], handle: str | None = None) -> None:
        with self._lock:
            self.usergroups[group_id] = list(members)
            self.usergroup_handles[group_id] = handle or group_id.lower()

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

    def archive_channel(self, channel: str) -> None:
        """Posts to `channel` are refused from now on (`is_archived`), as Slack does for an archived channel."""
        with self._lock:
            self.archived.add(channel)

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

    # The API (its methods: tests/fakes/slack_methods.py) -------------------------------------------

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
        if limit is not None and blocks_text(maybe_json(params.get("blocks"))) > limit:
            return {"ok": False, "error": "msg_blocks_too_long"}
        with self._lock:
            return handler(params)

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
