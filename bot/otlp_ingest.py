"""`POST /v1/traces`: OTLP/HTTP traces in, on the bot's HTTP server beside `POST /v1/exchanges` (bot.server routes
it here). The bot's own OpenTelemetry exporter points at relmon; each chat generation span becomes an exchange
(common.otlp_exchanges); a request's exchanges are handed on together exactly as a `POST /v1/exchanges` batch is
(bot.publishing's `exchanges_entry`: a few `ingest_exchanges` tasks noted in one Redis transaction and published, or
one entry in the disk spool through an outage). Every other span is dropped unread.

The same checks as bot.ingest, with its tokens, size limit (RELMON_INGEST_MAX_BYTES, gzip bodies inflated within
it) and per-token rate; then the body, protobuf or JSON (common.otlp_wire), answered in the request's encoding:
200 with an ExportTraceServiceResponse (`partial_success` counts the chat spans that made no exchange, with the
first reason), or a google.rpc.Status: 400 for a body that does not decode (never a 5xx), 503 with Retry-After
when the spool is full. docs/ingest.md, "OpenTelemetry traces"."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import redis

from bot.ingest import SPOOL_FULL_RETRY_SECONDS, bearer, matching_token, over_rate
from bot.publishing import exchanges_entry
from bot.spool import Entry
from common import otlp_wire
from common.otlp_exchanges import convert
from store.settings import Settings

log = logging.getLogger("relmon.ingest")

TRACES_PATH = "/v1/traces"
_ASCII_NUMBER = re.compile(r"[0-9]{1,18}")
# google.rpc.Code numbers of a refusal's Status body (OTLP/HTTP answers errors with a Status).
_CODES = {400: 3, 401: 16, 404: 5, 405: 12, 411: 3, 413: 8, 415: 3, 429: 8, 503: 14}


@dataclass(frozen=True)
class TracesAnswer:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


def refusal(status: int, message: str, content_type: str, headers: Iterable[tuple[str, str]] = ()) -> TracesAnswer:
    """A refusal in the request's encoding (JSON when it has none relmon reads)."""
    encoding = content_type if content_type in otlp_wire.ENCODINGS else otlp_wire.JSON
    body = otlp_wire.status(_CODES.get(status, 2), message, encoding)
    return TracesAnswer(status, encoding, body, tuple(headers))


class TracesRoute:
    """The route: checks the request, converts its chat spans, hands their exchanges to `publish`
    (bot.publishing.EventPublisher)."""

    def __init__(self, settings: Settings, client: redis.Redis, publish: Callable[[Entry], bool]) -> None:
        self.tokens = settings.ingest_token_values()
        self.max_bytes = settings.ingest_max_bytes
        self.per_minute = settings.ingest_per_minute
        self.redis = client
        self.publish = publish

    def wsgi(self, environ: dict, start_response: Callable[..., Any]) -> list[bytes]:
        answer = self(environ)
        headers = [("Content-Type", answer.content_type), ("Content-Length", str(len(answer.body))), *answer.headers]
        start_response(f"{answer.status} {HTTPStatus(answer.status).phrase}", headers)
        return [answer.body]

    def __call__(self, environ: dict, now: float | None = None) -> TracesAnswer:
        answer = self.answer(environ, time.time() if now is None else now)
        if answer.status >= 400:
            log.info("traces refused", extra={"status": answer.status})
        return answer

    def answer(self, environ: dict, now: float) -> TracesAnswer:
        content_type = (environ.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
        if not self.tokens:
            return refusal(404, "ingest is off: set RELMON_INGEST_TOKENS to accept traces", content_type)
        if environ.get("REQUEST_METHOD") != "POST":
            return refusal(405, "POST only", content_type, [("Allow", "POST")])
        token = matching_token(bearer(environ.get("HTTP_AUTHORIZATION")), self.tokens)
        if token is None:
            return refusal(
                401,
                "send Authorization: Bearer <a token of RELMON_INGEST_TOKENS> "
                "(OTEL_EXPORTER_OTLP_TRACES_HEADERS=Authorization=Bearer%20<token>)",
                content_type,
                [("WWW-Authenticate", "Bearer")],
            )
        wait = over_rate(self.redis, token, self.per_minute, now)
        if wait is not None:
            message = f"over {self.per_minute} requests a minute for this token: retry in {wait} s"
            return refusal(429, message, content_type, [("Retry-After", str(wait))])
        if content_type not in otlp_wire.ENCODINGS:
            return refusal(415, "send Content-Type: application/x-protobuf or application/json", content_type)
        length = environ.get("CONTENT_LENGTH") or ""
        if not _ASCII_NUMBER.fullmatch(length):
            return refusal(411, "Content-Length required", content_type)
        if int(length) > self.max_bytes:
            message = f"body over {self.max_bytes} bytes (RELMON_INGEST_MAX_BYTES): export smaller batches"
            return refusal(413, message, content_type)
        body = environ["wsgi.input"].read(int(length))
        if len(body) != int(length):
            return refusal(400, "body shorter than its Content-Length", content_type)
        try:
            data = otlp_wire.inflated(body, environ.get("HTTP_CONTENT_ENCODING") or "", self.max_bytes)
            request = otlp_wire.decode(data, content_type)
        except otlp_wire.Undecodable as error:
            return refusal(400, str(error), content_type)
        converted = convert(request)
        tasks = [exchange.to_task() for exchange in converted.exchanges]
        if tasks and not self.publish(exchanges_entry(tasks)):
            return refusal(
                503,
                "relmon's spool is full (Redis or the broker is down): export again later; spans already taken "
                "are stored once",
                content_type,
                [("Retry-After", str(SPOOL_FULL_RETRY_SECONDS))],
            )
        if converted.rejected:
            log.info(
                "trace spans rejected",
                extra={"rejected": len(converted.rejected), "reason": converted.rejected[0][:300]},
            )
        message = converted.rejected[0] if converted.rejected else ""
        if len(converted.rejected) > 1:
            message += f" (and {len(converted.rejected) - 1} more)"
        return TracesAnswer(200, content_type, otlp_wire.response(len(converted.rejected), message, content_type))
