"""`relmon bot` over Socket Mode (SLACK_APP_TOKEN set): events over Slack's websocket, and on --port over HTTP the
bot's routes other than Slack's (bot.service_wsgi: `GET /healthz`, `GET /metrics`, the ingest API and
`POST /v1/traces`, the same app as HTTP mode's), from the standard library's WSGI server in a thread."""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.error import BoltError
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.client import BaseSocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from bot.health import health_report
from bot.request_guard import payload_problem
from bot.service_wsgi import ServiceWSGI, ingest_routes, serve_in_thread
from common import metrics
from common.backoff import backoff_seconds
from common.runtime import Runtime
from common.startup import StartupError
from common.telemetry.scrub import problem_text
from store.settings import Settings

log = logging.getLogger("relmon.bot")


def serve_socket_mode(settings: Settings, host: str, port: int) -> int:
    """Events over Slack's websocket (no public URL); on --port, health checks, metrics and the ingest API."""
    from bot.app import create_app
    from bot.deps import BotDeps

    runtime = Runtime(settings)
    deps = BotDeps.build(runtime)  # one publisher (and spool) for Slack's events and the ingest API's exchanges
    try:
        app = create_app(settings, runtime, deps)  # checks the bot token (auth.test)
    except (SlackApiError, BoltError) as error:  # Bolt wraps auth.test's refusal in a BoltError
        refusal = error if isinstance(error, SlackApiError) else (error.__cause__ or error.__context__)
        code = refusal.response.get("error") if isinstance(refusal, SlackApiError) else str(error)[:200]
        raise StartupError(
            f"Slack refused SLACK_BOT_TOKEN ({code}): use the app's Bot User OAuth Token "
            "(xoxb-...), from the app page > OAuth & Permissions; `relmon doctor` checks it."
        ) from None
    except OSError as error:  # URLError included
        raise slack_out_of_reach("check SLACK_BOT_TOKEN", error) from None
    handler = GuardedSocketModeHandler(app, settings.secret("slack_app_token"))
    try:
        scrape = metrics.scraper(runtime)  # the state read once per 15 s, however many scrape
        wsgi = ServiceWSGI(
            settings,
            lambda: health_report(runtime, handler.client.is_connected),
            scrape,
            *ingest_routes(settings, runtime.redis, deps.publisher),
        )
        metrics.create_counters()
        http = serve_in_thread(host, port, wsgi)
        if settings.metrics_port:  # GET /metrics alone, by the door's rule (a server of its own)
            metrics.serve_metrics_port(settings, settings.metrics_port, scrape)
    except OSError as error:
        print(f"relmon bot: cannot serve HTTP on {host}:{port}: {error.strerror or error}", file=sys.stderr)
        return 1
    log.info("socket mode", extra={"host": host, "port": port, "ingest": bool(settings.ingest_token_values())})
    try:
        connect_socket_mode(handler)
        threading.Event().wait()  # what SocketModeHandler.start does once connected: serve until stopped
    finally:
        http.shutdown()
    return 0


# Socket Mode's envelope types, as the request guard names the same payloads over HTTP.
_PAYLOAD_KINDS = {"events_api": "events", "interactive": "interactive", "slash_commands": "command"}


class GuardedSocketModeHandler(SocketModeHandler):
    """Payloads go through the HTTP path's shape check before Bolt: a malformed one is acknowledged (so Slack
    does not resend it) and dropped, instead of failing inside Bolt with a traceback per delivery."""

    def handle(self, client: BaseSocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        kind = _PAYLOAD_KINDS.get(req.type)
        problem = payload_problem(kind, req.payload) if kind else None
        if problem:
            log.info("request refused", extra={"status": 400, "reason": f"malformed {kind}: {problem}"})
            client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        started = time.monotonic()
        super().handle(client, req)  # Bolt acknowledges before it returns
        metrics.event_acked("socket_mode", 200, time.monotonic() - started)


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
            time.sleep(backoff_seconds(attempt - 1, base=2.0, cap=15.0, jitter=0))  # 2, 4, 8, 15 s
