"""`relmon bot`: the Slack app over HTTP on gunicorn (gthread workers), or over Socket Mode when
SLACK_APP_TOKEN is set (then only `GET /healthz` is served over HTTP, on the same --port, from a small stdlib
server in a thread: container health checks work in both modes).

HTTP routes: `POST /slack/events` (events, slash commands, interactivity) and `GET /healthz`.
Requests are checked before Bolt sees them, so bad input gets a 4xx and never a 500 that Slack would
retry: size (413), signature and timestamp (401), content type (415), body shape (400). Answers to
input Slack should not resend carry `X-Slack-No-Retry: 1`.
"""

from __future__ import annotations

import gc
import io
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_bolt.error import BoltError
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier

from common.runtime import Runtime
from common.startup import StartupError
from common.telemetry.scrub import problem_text
from store.settings import Settings

log = logging.getLogger("relmon.bot")

MAX_BODY_BYTES = 1024 * 1024
MAX_CLOCK_SKEW_SECONDS = 300  # Slack's own rule: reject requests older than 5 minutes
EVENT_PATH = "/slack/events"
HEALTH_PATH = "/healthz"
FORM = "application/x-www-form-urlencoded"
JSON = "application/json"

StartResponse = Callable[..., Any]


class BadRequest(Exception):
    def __init__(self, status: int, reason: str, *, no_retry: bool = True) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.no_retry = no_retry


_STATUS_TEXT = {
    200: "200 OK",
    400: "400 Bad Request",
    401: "401 Unauthorized",
    404: "404 Not Found",
    405: "405 Method Not Allowed",
    411: "411 Length Required",
    413: "413 Payload Too Large",
    415: "415 Unsupported Media Type",
    503: "503 Service Unavailable",
}


def _respond(start_response: StartResponse, status: int, body: dict, extra: Iterable[tuple[str, str]] = ()) -> list:
    data = json.dumps(body).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *extra]
    start_response(_STATUS_TEXT.get(status, f"{status} Error"), headers)
    return [data]


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
_PAYLOAD_LISTS = frozenset({"authorizations", "actions"})


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


def _loads(text: str, what: str) -> object:
    try:
        payload = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser allows
        raise BadRequest(400, f"malformed {what}") from None
    if _has_unstorable_text(payload):
        raise BadRequest(400, f"{what} holds NUL characters or lone surrogates")
    problem = payload_shape_error(payload) if isinstance(payload, dict) else None
    if problem:
        raise BadRequest(400, f"malformed {what}: {problem}")
    return payload


def check_shape(content_type: str, body: bytes) -> None:
    """Raise BadRequest unless the body is something Bolt can dispatch without failing."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(400, "body is not UTF-8") from None
    if content_type == JSON:
        payload = _loads(text, "JSON")
        if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
            raise BadRequest(400, "JSON body must be an object with a type")
        if payload["type"] == "url_verification" and not isinstance(payload.get("challenge"), str):
            raise BadRequest(400, "url_verification without a challenge")
        if payload["type"] == "event_callback":
            event = payload.get("event")
            if not isinstance(event, dict) or not isinstance(event.get("type"), str):
                raise BadRequest(400, "event_callback without an event")
            problem = message_shape_error(event) if event["type"] == "message" else None
            if problem:
                raise BadRequest(400, f"malformed message event: {problem}")
        return
    form = parse_qs(text, keep_blank_values=True)
    if "payload" in form:
        payload = _loads(form["payload"][-1], "payload JSON")
        if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
            raise BadRequest(400, "payload must be an object with a type")
        return
    if not form.get("command"):
        raise BadRequest(400, "form body is neither a payload nor a slash command")


class EventsWSGI:
    """The WSGI app: /healthz, and /slack/events validated then handed to Bolt."""

    def __init__(self, settings: Settings, app: App, runtime: Runtime) -> None:
        self.settings = settings
        self.runtime = runtime
        self.bolt = SlackRequestHandler(app)
        self.verifier = SignatureVerifier(settings.secret("slack_signing_secret") or "")

    def __call__(self, environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path == HEALTH_PATH:
            return self.health(start_response)
        if path != EVENT_PATH:
            return _respond(start_response, 404, {"error": "not found"})
        if method != "POST":
            return _respond(start_response, 405, {"error": "POST only"}, [("Allow", "POST")])
        try:
            body = self.validate(environ)
        except BadRequest as error:
            log.info("request refused", extra={"status": error.status, "reason": error.reason})
            extra = [("X-Slack-No-Retry", "1")] if error.no_retry else []
            return _respond(start_response, error.status, {"error": error.reason}, extra)
        environ["wsgi.input"] = io.BytesIO(body)  # Bolt reads the body again
        environ["CONTENT_LENGTH"] = str(len(body))
        return self.bolt(environ, start_response)

    def validate(self, environ: dict) -> bytes:
        length_header = environ.get("CONTENT_LENGTH") or ""
        if not length_header.isdigit():
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
        if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > MAX_CLOCK_SKEW_SECONDS:
            raise BadRequest(401, "stale or invalid timestamp")
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(400, "body is not UTF-8") from None
        if not self.verifier.is_valid(body=body, timestamp=timestamp, signature=signature):
            raise BadRequest(401, "invalid signature")
        content_type = (environ.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
        if content_type not in (JSON, FORM):
            raise BadRequest(415, "content type must be JSON or form-encoded")
        check_shape(content_type, body)
        return body

    def health(self, start_response: StartResponse) -> list:
        status, body = health_report(self.runtime)
        return _respond(start_response, status, body)


def health_report(runtime: Runtime, socket_mode_connected: Callable[[], bool] | None = None) -> tuple[int, dict]:
    """What /healthz answers, over HTTP and in Socket Mode alike: Redis answers a PING, and in Socket Mode the
    connection to Slack is up. 200 when every check is "ok", else 503 naming the failing one."""
    checks = {}
    try:
        runtime.redis.ping()
        checks["redis"] = "ok"
    except Exception as error:  # any failure means not healthy; say which
        checks["redis"] = f"error: {type(error).__name__}"
    if socket_mode_connected is not None:
        try:
            checks["socket_mode"] = "ok" if socket_mode_connected() else "error: not connected"
        except Exception as error:
            checks["socket_mode"] = f"error: {type(error).__name__}"
    healthy = all(value == "ok" for value in checks.values())
    return 200 if healthy else 503, {"status": "ok" if healthy else "error", "checks": checks}


def start_health_server(host: str, port: int, report: Callable[[], tuple[int, dict]]) -> ThreadingHTTPServer:
    """Socket Mode serves no Slack endpoint over HTTP, but container health checks still ask GET /healthz on
    --port: a tiny stdlib server in a daemon thread answers that, and 404 to everything else."""

    class HealthHandler(BaseHTTPRequestHandler):
        server_version = "relmon"
        sys_version = ""

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] == HEALTH_PATH:
                status, body = report()
            else:
                status, body = 404, {"error": "not found"}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # no access log, as over HTTP
            pass

    server = ThreadingHTTPServer((host, port), HealthHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="relmon-healthz", daemon=True).start()
    return server


def build_wsgi_app(settings: Settings, runtime: Runtime | None = None) -> EventsWSGI:
    from bot.app import create_app

    runtime = runtime or Runtime(settings)
    return EventsWSGI(settings, create_app(settings, runtime), runtime)


def _gunicorn(wsgi_factory: Callable[[], Any], options: dict[str, Any]):
    from gunicorn.app.base import BaseApplication

    class RelmonServer(BaseApplication):
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self):
            return wsgi_factory()  # in the worker process, after the fork: no shared connections

    return RelmonServer()


def _relmon_gunicorn_logger() -> type:
    """gunicorn's logger class, its error and access logs sent to relmon's root handler (JSON lines, secrets
    masked, texts scrubbed) instead of its own plain-text stderr handlers ("[date] [pid] [INFO] Listening at")."""
    from gunicorn.glogging import Logger

    class RelmonGunicornLogger(Logger):
        def setup(self, cfg: Any) -> None:
            super().setup(cfg)
            for logger in (self.error_log, self.access_log):
                for handler in list(logger.handlers):
                    logger.removeHandler(handler)
                logger.propagate = True  # to the root logger set up by common.telemetry.logs.setup_logging

    return RelmonGunicornLogger


def gunicorn_options(host: str, port: int, settings: Settings) -> dict[str, Any]:
    return {
        "bind": f"{host}:{port}",
        "worker_class": "gthread",
        # Two processes: an event's capture is CPU-bound Python (Bolt, Redis, SQL, the Celery publish), and one
        # process holds one core at most (the GIL). Two keep p99 low at 200 events/s on two cores.
        "workers": 2,
        # Freeze the master's objects before forking, so the workers' reference counting does not copy the
        # pages of every module the master imported (the workers share them: less memory).
        "pre_fork": lambda _server, _worker: gc.freeze(),
        "threads": 4,
        "timeout": 30,
        "graceful_timeout": 10,
        "keepalive": 5,
        "limit_request_line": 8190,
        "loglevel": settings.log_level.lower(),
        # No access log: a line per Slack event; refusals are logged by EventsWSGI ("request refused").
        "accesslog": None,
        "errorlog": "-",
        "logger_class": _relmon_gunicorn_logger(),
        "proc_name": "relmon-bot",
    }


# What each gunicorn worker would otherwise import on its own after the fork (the listeners and what they use
# on the first event, command or Home tab): imported once in the master, the workers share those pages.
MODULES_BEFORE_FORK = (
    "bot.app",
    "bot.listeners.capture",
    "bot.listeners.commands",
    "bot.listeners.home",
    "common.reports.figures",
    "common.messages.home",
)


def load_before_fork(settings: Settings) -> None:
    """Import in the master what the workers use, and the database's SQLAlchemy dialect (creating an engine
    loads it; no connection is made). `pre_fork`'s gc.freeze then keeps those objects' pages shared."""
    import importlib

    from store.db import make_engine

    for name in MODULES_BEFORE_FORK:
        importlib.import_module(name)
    make_engine(settings.resolved_database_url).dispose()


def prepare(settings: Settings, component: str = "bot") -> None:
    """Start-up shared by HTTP and Socket Mode (and with the worker and beat): logging, embedded Redis, schema,
    Celery."""
    from common.startup import start_process

    start_process(settings, component, migrate_in_child_process=True)


def serve(settings: Settings, host: str = "0.0.0.0", port: int = 3000) -> int:
    missing = settings.missing_message(llm=False)
    if missing:
        print(missing, file=sys.stderr)
        return 2
    prepare(settings)
    if settings.slack_app_token:
        return serve_socket_mode(settings, host, port)
    log.info("serving HTTP", extra={"host": host, "port": port, "path": EVENT_PATH})
    load_before_fork(settings)
    _gunicorn(lambda: build_wsgi_app(settings), gunicorn_options(host, port, settings)).run()
    return 0


def serve_socket_mode(settings: Settings, host: str, port: int) -> int:
    """Events over Slack's websocket (no public URL); GET /healthz on --port for health checks."""
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    from bot.app import create_app

    runtime = Runtime(settings)
    try:
        app = create_app(settings, runtime)  # checks the bot token (auth.test)
    except (SlackApiError, BoltError) as error:  # Bolt wraps auth.test's refusal in a BoltError
        refusal = error if isinstance(error, SlackApiError) else (error.__cause__ or error.__context__)
        code = refusal.response.get("error") if isinstance(refusal, SlackApiError) else str(error)[:200]
        raise StartupError(
            f"Slack refused SLACK_BOT_TOKEN ({code}): use the app's Bot User OAuth Token "
            "(xoxb-...), from the app page > OAuth & Permissions; `relmon doctor` checks it."
        ) from None
    except OSError as error:  # URLError included
        raise slack_out_of_reach("check SLACK_BOT_TOKEN", error) from None
    handler = SocketModeHandler(app, settings.secret("slack_app_token"))
    try:
        health = start_health_server(host, port, lambda: health_report(runtime, handler.client.is_connected))
    except OSError as error:
        print(f"relmon bot: cannot serve {HEALTH_PATH} on {host}:{port}: {error.strerror or error}", file=sys.stderr)
        return 1
    log.info("socket mode", extra={"host": host, "port": port, "path": HEALTH_PATH})
    try:
        connect_socket_mode(handler)
        threading.Event().wait()  # what SocketModeHandler.start does once connected: serve until stopped
    finally:
        health.shutdown()
    return 0


def slack_out_of_reach(to_do: str, error: OSError) -> StartupError:
    return StartupError(
        f"cannot reach Slack to {to_do}: {problem_text(error)} Check the network (and SLACK_API_URL if set)."
    )


SOCKET_MODE_CONNECT_ATTEMPTS = 5  # over about 30 s: a network blip at start-up is waited out


def connect_socket_mode(handler: Any) -> None:
    """Open the Socket Mode connection, or say in one line why it cannot be (StartupError, exit 3): Slack
    refusing the app token is a setting to fix; Slack out of reach is retried for a while first."""
    for attempt in range(1, SOCKET_MODE_CONNECT_ATTEMPTS + 1):
        try:
            handler.connect()
            return
        except SlackApiError as error:
            raise StartupError(
                f"Slack refused Socket Mode ({error.response.get('error')}): SLACK_APP_TOKEN must be an app-level "
                "token (xapp-...) with connections:write, and Socket Mode must be on in the app's settings "
                "(app page > Socket Mode); or unset SLACK_APP_TOKEN to receive events over HTTP."
            ) from None
        except OSError as error:  # URLError included: Slack out of reach, perhaps only for a moment
            if attempt == SOCKET_MODE_CONNECT_ATTEMPTS:
                raise slack_out_of_reach("open Socket Mode", error) from None
            log.warning("socket mode connection failed, retrying", extra={"attempt": attempt, "error": repr(error)})
            time.sleep(min(2.0**attempt, 15.0))
