"""`relmon bot`: the Slack app over HTTP on gunicorn (gthread workers), or over Socket Mode when
SLACK_APP_TOKEN is set.

HTTP routes: `POST /slack/events` (events, slash commands, interactivity) and `GET /healthz`.
Requests are checked before Bolt sees them, so bad input gets a 4xx and never a 500 that Slack would
retry: size (413), signature and timestamp (401), content type (415), body shape (400). Answers to
input Slack should not resend carry `X-Slack-No-Retry: 1`.
"""

from __future__ import annotations

import io
import json
import logging
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs

from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk.signature import SignatureVerifier

from store.settings import Settings
from workers import celery_app
from workers.runtime import Runtime

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


def check_shape(content_type: str, body: bytes) -> None:
    """Raise BadRequest unless the body is something Bolt can dispatch without failing."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(400, "body is not UTF-8") from None
    if content_type == JSON:
        try:
            payload = json.loads(text)
        except ValueError:
            raise BadRequest(400, "malformed JSON") from None
        if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
            raise BadRequest(400, "JSON body must be an object with a type")
        if payload["type"] == "url_verification" and not isinstance(payload.get("challenge"), str):
            raise BadRequest(400, "url_verification without a challenge")
        if payload["type"] == "event_callback":
            event = payload.get("event")
            if not isinstance(event, dict) or not isinstance(event.get("type"), str):
                raise BadRequest(400, "event_callback without an event")
        return
    form = parse_qs(text, keep_blank_values=True)
    if "payload" in form:
        try:
            payload = json.loads(form["payload"][-1])
        except ValueError:
            raise BadRequest(400, "malformed payload JSON") from None
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
        checks = {}
        try:
            self.runtime.redis.ping()
            checks["redis"] = "ok"
        except Exception as error:  # any failure means not healthy; say which
            checks["redis"] = f"error: {type(error).__name__}"
        healthy = all(value == "ok" for value in checks.values())
        return _respond(
            start_response, 200 if healthy else 503, {"status": "ok" if healthy else "error", "checks": checks}
        )


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


def gunicorn_options(host: str, port: int, settings: Settings) -> dict[str, Any]:
    return {
        "bind": f"{host}:{port}",
        "worker_class": "gthread",
        "workers": 1,  # one process keeps memory low; threads carry the I/O-bound requests
        "threads": 16,
        "timeout": 30,
        "graceful_timeout": 10,
        "keepalive": 5,
        "limit_request_line": 8190,
        "loglevel": settings.log_level.lower(),
        "accesslog": None,
        "errorlog": "-",
        "proc_name": "relmon-bot",
    }


def prepare(settings: Settings, component: str = "bot") -> None:
    """Start-up shared by HTTP and Socket Mode: logging, embedded Redis, Celery, database schema."""
    from workers.telemetry import setup_logging

    setup_logging(settings, component)
    if not settings.redis_url:
        from workers.embedded_redis import ensure_embedded_redis

        _keep["embedded_redis"] = ensure_embedded_redis(settings)
    celery_app.configure(settings)
    runtime = Runtime(settings)
    runtime.db.migrate()
    runtime.db.dispose()


_keep: dict[str, Any] = {}  # objects that must live as long as the process


def serve(settings: Settings, host: str = "0.0.0.0", port: int = 3000) -> int:
    missing = settings.missing_message(llm=False)
    if missing:
        print(missing, file=sys.stderr)
        return 2
    prepare(settings)
    if settings.slack_app_token:
        from slack_bolt.adapter.socket_mode import SocketModeHandler

        from bot.app import create_app

        log.info("socket mode")
        SocketModeHandler(create_app(settings), settings.secret("slack_app_token")).start()
        return 0
    log.info("serving HTTP", extra={"host": host, "port": port, "path": EVENT_PATH})
    _gunicorn(lambda: build_wsgi_app(settings), gunicorn_options(host, port, settings)).run()
    return 0
