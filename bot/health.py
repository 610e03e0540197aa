"""`GET /healthz`, over HTTP and in Socket Mode alike."""

from __future__ import annotations

from collections.abc import Callable
from http.server import ThreadingHTTPServer

from common.metrics_door import HEALTH_PATH, start_server
from common.runtime import Runtime

__all__ = ["HEALTH_PATH", "health_report", "start_health_server"]


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
    *,
    token: str | None = None,
) -> ThreadingHTTPServer:
    """Socket Mode serves no Slack endpoint over HTTP, but container health checks still ask GET /healthz on
    --port: a tiny stdlib server in a daemon thread answers that, GET /metrics with `scrape` (body, content
    type) through the same door as the HTTP bot's --port (`common.metrics_door`: only with the token), and 404 to
    everything else."""
    return start_server(host, port, token=token, scrape=scrape, own_port=False, health=report, name="relmon-healthz")
