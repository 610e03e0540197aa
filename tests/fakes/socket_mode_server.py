"""A local Slack Socket Mode endpoint for tests: a plain ws:// websocket server on 127.0.0.1 (the `websockets`
library's sync server), served from a background thread. slack_sdk's SocketModeClient connects to it when
`apps.connections.open` answers with `.url` (FakeSlack(socket_mode_url=...) does).

    with FakeSocketMode() as socket_mode, FakeSlack(socket_mode_url=socket_mode.url) as slack:
        ...  # start the app with SLACK_APP_TOKEN and SLACK_API_URL=slack.api_url
        socket_mode.wait_for_connection()
        envelope_id = socket_mode.push_event(slack_requests.envelope(event))
        assert socket_mode.wait_for_ack(envelope_id) is not None

On connect the server sends Slack's `hello`. `push` sends an envelope to the connected client; every message
the client sends back is recorded (`.received`), and those with an `envelope_id` are its acknowledgements
(`.acks`). `disconnect(reason)` sends Slack's `disconnect` message (the client should reconnect).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
import uuid
from typing import Any, Self

from websockets.exceptions import ConnectionClosed
from websockets.sync.server import ServerConnection, serve

from tests.fakes.background import BackgroundServer

APP_ID = "A_RELMON"


class FakeSocketMode(BackgroundServer):
    """Slack's Socket Mode websocket on 127.0.0.1 (a free port), served from a background thread."""

    thread_name = "fake-socket-mode"

    def __init__(self, host: str = "127.0.0.1", port: int = 0, app_id: str = APP_ID) -> None:
        self.app_id = app_id
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._connections: list[ServerConnection] = []  # open, oldest first
        self.connection_count = 0  # connections ever accepted (a reconnect adds one)
        self.paths: list[str] = []  # request path (with query) of every connection
        self.sent: list[dict[str, Any]] = []  # every message pushed to a client, hello included
        self.received: list[Any] = []  # every message a client sent (parsed JSON, or the raw text)
        self.acks: dict[str, dict[str, Any]] = {}  # envelope_id -> the client's acknowledgement
        self._envelope_ids = itertools.count(1)
        self._server = serve(self._handle, host, port)
        self._thread: threading.Thread | None = None

    # Life cycle -------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._server.socket.getsockname()[1]

    @property
    def url(self) -> str:
        """What `apps.connections.open` answers: Slack's shape, ws:// on this port."""
        return f"ws://127.0.0.1:{self.port}/link/?ticket=test-ticket&app_id={self.app_id}"

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._server.serve_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        with self._lock:
            connections = list(self._connections)
        for connection in connections:  # websockets 13's shutdown() leaves open connections alone
            with contextlib.suppress(Exception):
                connection.close()
        self._server.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # The endpoint -------------------------------------------------------------------------------

    def _handle(self, connection: ServerConnection) -> None:
        with self._lock:
            self.connection_count += 1
            self.paths.append(connection.request.path if connection.request else "")
            self._connections.append(connection)
            self._changed.notify_all()
        try:
            self._send(connection, self.hello())
            for message in connection:
                self._record(message)
        except ConnectionClosed:
            pass
        finally:
            with self._lock:
                with contextlib.suppress(ValueError):
                    self._connections.remove(connection)
                self._changed.notify_all()

    def hello(self) -> dict[str, Any]:
        with self._lock:
            count = len(self._connections)
        return {
            "type": "hello",
            "num_connections": count,
            "debug_info": {"host": "applink-test", "build_number": 1, "approximate_connection_time": 18060},
            "connection_info": {"app_id": self.app_id},
        }

    def _record(self, message: str | bytes) -> None:
        text = message.decode("utf-8", "replace") if isinstance(message, bytes) else message
        try:
            parsed: Any = json.loads(text)
        except ValueError:
            parsed = text
        with self._lock:
            self.received.append(parsed)
            if isinstance(parsed, dict) and isinstance(parsed.get("envelope_id"), str):
                self.acks.setdefault(parsed["envelope_id"], parsed)
            self._changed.notify_all()

    def _send(self, connection: ServerConnection, message: dict[str, Any]) -> None:
        with self._lock:
            self.sent.append(message)
        connection.send(json.dumps(message))

    # Pushing ------------------------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        with self._lock:
            return bool(self._connections)

    def wait_for_connection(self, timeout: float = 30.0, count: int = 1) -> bool:
        """Wait until a client is connected and at least `count` connections were ever made."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not (self._connections and self.connection_count >= count):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 0.5))
            return True

    def push(
        self,
        payload: dict[str, Any],
        *,
        type: str = "events_api",
        envelope_id: str | None = None,
        retry_attempt: int = 0,
        retry_reason: str = "",
        accept_response_payload: bool = False,
        timeout: float = 30.0,
    ) -> str:
        """Send one envelope to the newest connection (waiting up to `timeout` for one); returns its envelope_id."""
        envelope_id = envelope_id or f"{next(self._envelope_ids):04d}-{uuid.uuid4()}"
        envelope = {
            "envelope_id": envelope_id,
            "type": type,
            "accept_response_payload": accept_response_payload,
            "retry_attempt": retry_attempt,
            "retry_reason": retry_reason,
            "payload": payload,
        }
        if not self.wait_for_connection(timeout):
            raise TimeoutError(f"no Socket Mode client connected within {timeout}s")
        with self._lock:
            connection = self._connections[-1]
        self._send(connection, envelope)
        return envelope_id

    def push_event(self, body: dict[str, Any], *, retry_attempt: int = 0, retry_reason: str = "", **kw: Any) -> str:
        """An Events API body (slack_requests.envelope) as Slack delivers it over Socket Mode."""
        if retry_attempt and not retry_reason:
            retry_reason = "timeout"
        return self.push(body, type="events_api", retry_attempt=retry_attempt, retry_reason=retry_reason, **kw)

    def disconnect(self, reason: str = "refresh_requested") -> None:
        """Slack's notice that the connection is going away: the client should open a new one."""
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(ConnectionClosed):
                self._send(connection, {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-test"}})

    # Inspection -------------------------------------------------------------------------------

    def ack(self, envelope_id: str) -> dict[str, Any] | None:
        with self._lock:
            return self.acks.get(envelope_id)

    def wait_for_ack(self, envelope_id: str, timeout: float = 30.0) -> dict[str, Any] | None:
        """The client's acknowledgement of this envelope, waiting up to `timeout` seconds (None if none came)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while envelope_id not in self.acks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(min(remaining, 0.5))
            return self.acks[envelope_id]
