"""The bot's HTTP routes other than Slack's own, one WSGI app for both modes: `GET /healthz`, `GET /metrics` (through
`common.metrics_door`), the ingest API (`/v1/exchanges` and the paths under it, `bot.ingest`) and `POST /v1/traces`
(`bot.otlp_ingest`). Over HTTP, `bot.server.EventsWSGI` serves these beside `/slack/events` on gunicorn; in Socket
Mode, `serve_in_thread` serves them alone on --port (a team with no public URL for Slack still needs its bot's side
to reach relmon, from inside its own network). Same tokens, limits and answers either way: the same objects."""

from __future__ import annotations

import json
import logging
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import redis

from bot.health import HEALTH_PATH
from bot.ingest import INGEST_PATH, IngestRoute
from bot.otlp_ingest import TRACES_PATH, TracesRoute
from bot.spool import Entry
from common import metrics
from common.metrics_door import Scrape, metrics_answer, scrape_slots
from store.settings import Settings

log = logging.getLogger("relmon.bot")

StartResponse = Callable[..., Any]
HealthReport = Callable[[], tuple[int, dict]]

STATUS_TEXT = {
    200: "200 OK",
    202: "202 Accepted",
    400: "400 Bad Request",
    401: "401 Unauthorized",
    404: "404 Not Found",
    405: "405 Method Not Allowed",
    411: "411 Length Required",
    413: "413 Payload Too Large",
    415: "415 Unsupported Media Type",
    429: "429 Too Many Requests",
    500: "500 Internal Server Error",
    503: "503 Service Unavailable",
}


def respond(start_response: StartResponse, status: int, body: dict, extra: Iterable[tuple[str, str]] = ()) -> list:
    data = json.dumps(body).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data))), *extra]
    start_response(STATUS_TEXT.get(status, f"{status} Error"), headers)
    return [data]


def ingest_routes(
    settings: Settings, client: redis.Redis, publish: Callable[[Entry], bool]
) -> tuple[IngestRoute, TracesRoute]:
    """The ingest API's routes, handing on through the process's one publisher (bot.publishing), in both modes."""
    return IngestRoute(settings, client, publish), TracesRoute(settings, client, publish)


class ServiceWSGI:
    """/healthz, /metrics, /v1/exchanges (404 without its route) and /v1/traces; 404 to any other path.

    `metrics_port`: the port gunicorn also listens on for /metrics alone (HTTP mode; a request that came through
    it may read /metrics without the token, and nothing else). None where that port has a server of its own."""

    def __init__(
        self,
        settings: Settings,
        health: HealthReport,
        scrape: Scrape,
        ingest: IngestRoute | None = None,
        traces: TracesRoute | None = None,
        *,
        metrics_port: int | None = None,
    ) -> None:
        self.health_report = health
        self.ingest = ingest
        self.traces = traces
        self.metrics_token = settings.secret("metrics_token")
        self.metrics_port = str(metrics_port) if metrics_port else None
        self.scrape = scrape  # the state read once per 15 s for this process and its siblings
        self.scrapes = scrape_slots()

    def __call__(self, environ: dict, start_response: StartResponse) -> Iterable[bytes]:
        answered = self.serve(environ, start_response)
        return respond(start_response, 404, {"error": "not found"}) if answered is None else answered

    def serve(self, environ: dict, start_response: StartResponse) -> Iterable[bytes] | None:
        """The answer when the path is one of these routes (or came through the metrics port), else None."""
        path = environ.get("PATH_INFO", "")
        # Which of gunicorn's listeners took the request (its socket's port, not the Host header).
        own_port = self.metrics_port is not None and environ.get("SERVER_PORT") == self.metrics_port
        if own_port and path != metrics.METRICS_PATH:
            return respond(start_response, 404, {"error": "not found"})  # the metrics port serves nothing else
        if path == HEALTH_PATH:
            status, body = self.health_report()
            return respond(start_response, status, body)
        if path == metrics.METRICS_PATH:
            return self.metrics(environ, start_response, own_port=own_port)
        if (path == INGEST_PATH or path.startswith(INGEST_PATH + "/")) and self.ingest is not None:
            answer = self.ingest(environ)
            return respond(start_response, answer.status, answer.body, answer.headers)
        if path == TRACES_PATH and self.traces is not None:
            return self.traces.wsgi(environ, start_response)
        return None

    def metrics(self, environ: dict, start_response: StartResponse, *, own_port: bool) -> list:
        answer = metrics_answer(
            environ.get("REQUEST_METHOD", "GET"),
            environ.get("HTTP_AUTHORIZATION"),
            token=self.metrics_token,
            own_port=own_port,
            scrape=self.scrape,
            slots=self.scrapes,
        )
        headers = [("Content-Type", answer.content_type), ("Content-Length", str(len(answer.body))), *answer.headers]
        start_response(STATUS_TEXT.get(answer.status, f"{answer.status} Error"), headers)
        return [answer.body]


# A client that stops sending mid-body frees its thread after this long (gunicorn's own timeout is 30 s).
REQUEST_TIMEOUT_SECONDS = 30


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _Handler(WSGIRequestHandler):
    timeout = REQUEST_TIMEOUT_SECONDS

    def log_message(self, format: str, *args: Any) -> None:  # no access log, as on gunicorn; refusals are logged
        pass


def serve_in_thread(host: str, port: int, app: Callable[..., Iterable[bytes]]) -> WSGIServer:
    """`app` on host:port from the standard library's WSGI server, a thread per request, in a daemon thread (Socket
    Mode's --port: the process's main work is the websocket). Raises OSError when the port cannot be had."""
    server = make_server(host, port, app, server_class=_ThreadingWSGIServer, handler_class=_Handler)
    server.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=server.serve_forever, args=(0.2,), name="relmon-http", daemon=True).start()
    return server
