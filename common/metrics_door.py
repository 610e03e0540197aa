"""Who may read `GET /metrics`, the same rule in every process (bot, worker, beat): never an open door beside
`/slack/events`.

- `RELMON_METRICS_TOKEN` set: every /metrics asks `Authorization: Bearer <token>` (compared in constant time;
  wrong or missing: 401 and a short body), and a metrics port of its own listens on all interfaces (Prometheus in
  another container reaches it, with the token).
- No token: a metrics port of its own (`RELMON_METRICS_PORT`, `RELMON_WORKER_METRICS_PORT` of the worker,
  `RELMON_BEAT_METRICS_PORT`) listens on 127.0.0.1 only, unguarded; the bot's --port, which Slack reaches, serves
  no /metrics at all: 404 with a hint (not 401: no token would open it).

A process serves at most `MAX_CONCURRENT_SCRAPES` scrapes at once (others: 503, retry): a flood of scrapes keeps
gunicorn's other threads free for Slack's acks. The state a scrape reports is read once for many scrapes
(`common.metrics_cache`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from common.metrics_cache import StateBusy

log = logging.getLogger("relmon.metrics")

METRICS_PATH = "/metrics"
HEALTH_PATH = "/healthz"
LOOPBACK = "127.0.0.1"
ALL_INTERFACES = "0.0.0.0"
# Of gunicorn's 4 threads per process, at most 2 serve scrapes: the others stay free for Slack.
MAX_CONCURRENT_SCRAPES = 2
NO_TOKEN_HINT = (
    "/metrics is not served on this port without RELMON_METRICS_TOKEN (then ask with Authorization: Bearer "
    "<token>); or set RELMON_METRICS_PORT to serve it on 127.0.0.1"
)
JSON = "application/json"

Scrape = Callable[[], tuple[bytes, str]]


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = ()


def json_answer(status: int, body: dict, *headers: tuple[str, str]) -> Answer:
    return Answer(status, json.dumps(body).encode(), JSON, headers)


def bind_host(token: str | None) -> str:
    """Where a metrics port of its own listens: everywhere only when the token guards it."""
    return ALL_INTERFACES if token else LOOPBACK


def bearer_matches(token: str, authorization: str | None) -> bool:
    """`Authorization: Bearer <token>`, the scheme in any case. Both sides are hashed first, so the comparison
    takes the same time whatever the length or the first wrong byte of what was sent."""
    scheme, _, given = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    # Header values arrive decoded as Latin-1 (WSGI, http.server): back to the bytes that were sent.
    sent = hashlib.sha256(given.strip().encode("latin-1", "replace")).digest()
    return hmac.compare_digest(sent, hashlib.sha256(token.encode()).digest())


def refusal(token: str | None, authorization: str | None, *, own_port: bool) -> Answer | None:
    """None when this request may read /metrics; else the answer that says why not."""
    if token:
        if bearer_matches(token, authorization):
            return None
        return json_answer(
            401,
            {"error": "unauthorized: send Authorization: Bearer <RELMON_METRICS_TOKEN>"},
            ("WWW-Authenticate", 'Bearer realm="relmon metrics"'),
        )
    if own_port:
        return None
    return json_answer(404, {"error": "not found", "hint": NO_TOKEN_HINT})


def metrics_answer(
    method: str,
    authorization: str | None,
    *,
    token: str | None,
    own_port: bool,
    scrape: Scrape,
    slots: threading.Semaphore,
) -> Answer:
    """GET /metrics, whatever serves it (gunicorn's WSGI app, the small server below): the door, then the
    scrape, and never a 500 (a scrape that cannot be made now is a 503 to retry)."""
    refused = refusal(token, authorization, own_port=own_port)
    if refused is not None:
        return refused
    if method not in ("GET", "HEAD"):
        return json_answer(405, {"error": "GET only"}, ("Allow", "GET"))
    if not slots.acquire(blocking=False):
        return json_answer(503, {"error": "busy: other scrapes are being served; retry"}, ("Retry-After", "1"))
    try:
        body, content_type = scrape()
    except StateBusy:
        return json_answer(503, {"error": "the state is being read; retry"}, ("Retry-After", "1"))
    except Exception as error:  # a scrape must not fail as a 500 with a traceback; the log says what happened
        log.warning("metrics: scrape failed", extra={"error": type(error).__name__})
        return json_answer(503, {"error": "metrics unavailable now; retry"}, ("Retry-After", "5"))
    finally:
        slots.release()
    return Answer(200, body, content_type)


def scrape_slots() -> threading.Semaphore:
    return threading.BoundedSemaphore(MAX_CONCURRENT_SCRAPES)


def start_server(
    host: str,
    port: int,
    *,
    token: str | None,
    scrape: Scrape | None,
    own_port: bool,
    health: Callable[[], tuple[int, dict]] | None = None,
    name: str = "relmon-metrics",
) -> ThreadingHTTPServer:
    """A small stdlib HTTP server in a daemon thread: GET /metrics through the door (when `scrape` is given),
    GET /healthz (when `health` is), 404 to everything else. For the worker's and beat's metrics ports, the
    bot's own metrics port in Socket Mode, and Socket Mode's --port."""
    slots = scrape_slots()

    class Handler(BaseHTTPRequestHandler):
        server_version = "relmon"
        sys_version = ""

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == HEALTH_PATH and health is not None:
                status, report = health()
                answer = json_answer(status, report)
            elif path == METRICS_PATH and scrape is not None:
                answer = metrics_answer(
                    "GET",
                    self.headers.get("Authorization"),
                    token=token,
                    own_port=own_port,
                    scrape=scrape,
                    slots=slots,
                )
            else:
                answer = json_answer(404, {"error": "not found"})
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            for header, value in answer.headers:
                self.send_header(header, value)
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, format: str, *args: Any) -> None:  # no access log, as over HTTP
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server
