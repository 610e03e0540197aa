"""`relmon bot`: the Slack app over HTTP on gunicorn (gthread workers), or over Socket Mode when
SLACK_APP_TOKEN is set (then --port serves every route below but `/slack/events`, from the standard library's WSGI
server in a thread: `bot.socket_mode`).

HTTP routes: `POST /slack/events` (events, slash commands, interactivity), and `bot.service_wsgi`'s, served in both
modes: `/v1/exchanges` and the paths under it (the ingest API, `bot.ingest`), `POST /v1/traces` (OTLP traces in,
`bot.otlp_ingest`), `GET /healthz` and `GET /metrics` (Prometheus, `common.metrics`; only with RELMON_METRICS_TOKEN's
bearer token, `common.metrics_door`). With RELMON_METRICS_PORT, gunicorn also listens there (127.0.0.1 unless the
token guards it), for GET /metrics alone. Requests are checked before Bolt sees them (`bot.request_guard`); answers
to input Slack should not resend carry `X-Slack-No-Retry: 1`. Socket Mode is `bot.socket_mode`.
"""

from __future__ import annotations

import gc
import io
import logging
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from slack_bolt import App
from slack_bolt.adapter.wsgi import SlackRequestHandler
from slack_sdk.signature import SignatureVerifier

from bot.health import health_report
from bot.ingest import IngestRoute
from bot.otlp_ingest import TracesRoute
from bot.request_guard import BadRequest, checked_body
from bot.service_wsgi import ServiceWSGI, StartResponse, ingest_routes, respond
from common import metrics
from common.metrics_door import bind_host
from common.runtime import Runtime
from store.settings import Settings

log = logging.getLogger("relmon.bot")

EVENT_PATH = "/slack/events"


class EventsWSGI(ServiceWSGI):
    """The WSGI app over HTTP: bot.service_wsgi's routes (/healthz, /metrics, the ingest API, /v1/traces, the same
    as Socket Mode's --port), and /slack/events checked (bot.request_guard), then dispatched by Bolt."""

    def __init__(
        self,
        settings: Settings,
        app: App,
        runtime: Runtime,
        ingest: IngestRoute | None = None,
        traces: TracesRoute | None = None,
    ) -> None:
        super().__init__(
            settings,
            lambda: health_report(runtime),
            metrics.scraper(runtime),
            ingest,
            traces,
            metrics_port=settings.metrics_port,
        )
        self.settings = settings
        self.runtime = runtime
        self.bolt = SlackRequestHandler(app)
        self.verifier = SignatureVerifier(settings.secret("slack_signing_secret") or "")

    def __call__(self, environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        answered = self.serve(environ, start_response)
        if answered is not None:
            return answered
        path = environ.get("PATH_INFO", "")
        method = environ.get("REQUEST_METHOD", "GET")
        if path != EVENT_PATH:
            return respond(start_response, 404, {"error": "not found"})
        if method != "POST":
            return respond(start_response, 405, {"error": "POST only"}, [("Allow", "POST")])
        started = time.monotonic()
        try:
            body = checked_body(environ, self.verifier)
        except BadRequest as error:
            log.info("request refused", extra={"status": error.status, "reason": error.reason})
            extra = [("X-Slack-No-Retry", "1")] if error.no_retry else []
            return respond(start_response, error.status, {"error": error.reason}, extra)
        environ["wsgi.input"] = io.BytesIO(body)  # Bolt reads the body again
        environ["CONTENT_LENGTH"] = str(len(body))
        answered_status: list[str] = []

        def timed_start_response(status: str, headers: list, *rest: Any) -> Any:
            answered_status.append(status.split(" ", 1)[0])
            return start_response(status, headers, *rest)

        body_parts = self.bolt(environ, timed_start_response)
        status = int(answered_status[0]) if answered_status else 0
        metrics.event_acked("http", status, time.monotonic() - started)
        return body_parts


def build_wsgi_app(settings: Settings, runtime: Runtime | None = None) -> EventsWSGI:
    from bot.app import create_app
    from bot.deps import BotDeps

    runtime = runtime or Runtime(settings)
    deps = BotDeps.build(runtime)  # one publisher (and spool) for Slack's events and the ingest API's exchanges
    app = create_app(settings, runtime, deps)
    ingest, traces = ingest_routes(settings, runtime.redis, deps.publisher)
    wsgi = EventsWSGI(settings, app, runtime, ingest, traces)
    metrics.create_counters()
    return wsgi


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
    binds = [f"{host}:{port}"]
    if settings.metrics_port:  # GET /metrics alone (EventsWSGI tells the listeners apart by their port)
        binds.append(f"{bind_host(settings.secret('metrics_token'))}:{settings.metrics_port}")
    return {
        "bind": binds,
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
    "bot.listeners.membership_events",
    "common.reports.figures",
    "common.messages.home",
    "prometheus_client",  # after start_process (common.metrics.prepare_process): its multiprocess mode
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
    if settings.metrics_port == port:
        print(
            f"RELMON_METRICS_PORT ({port}) is the bot's --port: give /metrics a port of its own, or set 0",
            file=sys.stderr,
        )
        return 2
    prepare(settings)
    if settings.slack_app_token:
        from bot.socket_mode import serve_socket_mode

        return serve_socket_mode(settings, host, port)
    log.info("serving HTTP", extra={"host": host, "port": port, "path": EVENT_PATH})
    if settings.metrics_port:
        metrics_host = bind_host(settings.secret("metrics_token"))
        log.info("serving metrics", extra={"host": metrics_host, "port": settings.metrics_port})
    load_before_fork(settings)
    _gunicorn(lambda: build_wsgi_app(settings), gunicorn_options(host, port, settings)).run()
    return 0
