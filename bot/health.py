"""`GET /healthz`, over HTTP and in Socket Mode alike."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from common.runtime import Runtime

HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"  # common.metrics.METRICS_PATH


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


def start_health_server(
    host: str,
    port: int,
    report: Callable[[], tuple[int, dict]],
    scrape: Callable[[], tuple[bytes, str]] | None = None,
) -> ThreadingHTTPServer:
    """Socket Mode serves no Slack endpoint over HTTP, but container health checks still ask GET /healthz on
    --port: a tiny stdlib server in a daemon thread answers that, GET /metrics with `scrape` (body, content
    type), and 404 to everything else."""

    class HealthHandler(BaseHTTPRequestHandler):
        server_version = "relmon"
        sys_version = ""

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            content_type = "application/json"
            if path == HEALTH_PATH:
                status, body = report()
                data = json.dumps(body).encode()
            elif path == METRICS_PATH and scrape is not None:
                status, (data, content_type) = 200, scrape()
            else:
                status, data = 404, json.dumps({"error": "not found"}).encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # no access log, as over HTTP
            pass

    server = ThreadingHTTPServer((host, port), HealthHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="relmon-healthz", daemon=True).start()
    return server
