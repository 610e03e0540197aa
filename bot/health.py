"""`GET /healthz`, over HTTP and in Socket Mode alike (bot.service_wsgi serves it in both)."""

from __future__ import annotations

from collections.abc import Callable

from common.metrics_door import HEALTH_PATH
from common.runtime import Runtime

__all__ = ["HEALTH_PATH", "health_report"]


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
