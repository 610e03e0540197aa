"""The ingest API, on the bot's HTTP server (bot.server routes every path under /v1/exchanges here):
`POST /v1/exchanges`, `POST /v1/exchanges/{id}/signals` (what the bot's side saw after an exchange:
common.exchange_signals) and `DELETE /v1/exchanges/{id}?bot=NAME` (a deletion: every copy is scrubbed).

The bot's side sends the exchanges relmon cannot read in Slack itself (its own agent DMs, a web widget): one
exchange, or {"exchanges": [...]} (at most 100), validated whole by common.exchanges (a batch with one bad exchange
is refused whole, naming it). 202 only once every exchange is durably noted: the request's exchanges handed on
together (one `ingest_exchanges` task) the one way the bot hands events on (bot.publishing: noted in Redis and
published, or kept in the disk spool through an outage, as one entry).

Checks, in this order: ingest on (RELMON_INGEST_TOKENS set, else 404), the path (404) and method (405), the
bearer token (401; compared in constant time against each token), the token's rate (429 with Retry-After;
RELMON_INGEST_PER_MINUTE requests a minute per token, counted in Redis: with Redis down nothing is counted and the
spool takes the exchanges), JSON (415), size (411, 413 past RELMON_INGEST_MAX_BYTES), the body (400 with each field
at fault). A signal and a deletion take the same way as an exchange (their own tasks, `ingest_signal` and
`forget_exchange`). docs/ingest.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import parse_qs

import redis

from bot.publishing import exchanges_entry, task_entry
from bot.spool import Entry
from common import task_names
from common.exchange_signals import exchange_key, parse_signal, signal_task
from common.exchanges import Refused, parse_body
from store.settings import Settings

log = logging.getLogger("relmon.ingest")

INGEST_PATH = "/v1/exchanges"
SIGNALS_SUFFIX = "/signals"
RATE_WINDOW_SECONDS = 60
SPOOL_FULL_RETRY_SECONDS = 60
_ASCII_NUMBER = re.compile(r"[0-9]{1,18}")


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict
    headers: tuple[tuple[str, str], ...] = ()


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None."""
    scheme, _, token = (header or "").strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return token.strip() or None


def matching_token(given: str | None, tokens: Sequence[str]) -> str | None:
    """The configured token `given` is, or None. Compared in constant time against every token (no early exit, so
    the time taken says nothing of which token, or how much of one, matched)."""
    if not given:
        return None
    found = None
    for token in tokens:
        if hmac.compare_digest(given.encode(), token.encode()):
            found = token
    return found


def token_key(token: str) -> str:
    """A token's name in Redis and the logs: a short hash, never the token."""
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def window_left(now: float, window: int = RATE_WINDOW_SECONDS) -> int:
    """Whole seconds until the current rate window ends (at least 1): the Retry-After of a 429."""
    return max(1, int(window - now % window + 0.999))


def over_rate(client: redis.Redis, token: str, per_minute: int, now: float) -> int | None:
    """Count one request against the token's minute; the seconds to wait when it is over the limit, else None.
    Redis down: not counted (the exchanges still reach the spool)."""
    key = f"relmon:ingest:rate:{token_key(token)}:{int(now // RATE_WINDOW_SECONDS)}"
    try:
        pipe = client.pipeline(transaction=True)
        pipe.incr(key)
        pipe.expire(key, RATE_WINDOW_SECONDS * 2)
        count = pipe.execute()[0]
    except redis.RedisError as error:
        log.warning("ingest rate not counted: Redis is unavailable", extra={"error": repr(error)[:200]})
        return None
    return window_left(now) if count > per_minute else None


def refused(
    status: int, error: str, *, problems: Sequence[str] = (), headers: Sequence[tuple[str, str]] = ()
) -> Answer:
    body: dict = {"error": error}
    if problems:
        body["problems"] = list(problems)
    return Answer(status, body, tuple(headers))


class IngestRoute:
    """The route: checks the request, then hands its exchanges to `publish` (bot.publishing.EventPublisher)."""

    def __init__(self, settings: Settings, client: redis.Redis, publish: Callable[[Entry], bool]) -> None:
        self.tokens = settings.ingest_token_values()
        self.max_bytes = settings.ingest_max_bytes
        self.per_minute = settings.ingest_per_minute
        self.redis = client
        self.publish = publish

    def __call__(self, environ: dict, now: float | None = None) -> Answer:
        answer = self.answer(environ, time.time() if now is None else now)
        if answer.status >= 400:
            log.info("ingest refused", extra={"status": answer.status, "reason": answer.body.get("error")})
        return answer

    def answer(self, environ: dict, now: float) -> Answer:
        if not self.tokens:
            return refused(404, "ingest is off: set RELMON_INGEST_TOKENS to accept exchanges")
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD")
        route = route_of(path, method)
        if route is None:
            return refused(404, "not found: see docs/ingest.md for the ingest API's paths")
        kind, exchange_id = route
        if kind == "method":
            allowed = "POST" if path == INGEST_PATH else "POST, DELETE" if path.endswith(SIGNALS_SUFFIX) else "DELETE"
            return refused(405, f"{allowed} only", headers=[("Allow", allowed)])
        denied = self.admitted(environ, now)
        if denied is not None:
            return denied
        if kind == "delete":
            return self.delete(environ, exchange_id)
        body = self.json_body(environ)
        if isinstance(body, Answer):
            return body
        if kind == "signal":
            return self.signal(body, exchange_id, now)
        return self.exchanges(body)

    def admitted(self, environ: dict, now: float) -> Answer | None:
        """The token and its rate: None when the request may go on."""
        token = matching_token(bearer(environ.get("HTTP_AUTHORIZATION")), self.tokens)
        if token is None:
            return refused(
                401,
                "send Authorization: Bearer <a token of RELMON_INGEST_TOKENS>",
                headers=[("WWW-Authenticate", "Bearer")],
            )
        wait = over_rate(self.redis, token, self.per_minute, now)
        if wait is not None:
            return refused(
                429,
                f"over {self.per_minute} requests a minute for this token: retry in {wait} s",
                headers=[("Retry-After", str(wait))],
            )
        return None

    def json_body(self, environ: dict) -> object:
        """The decoded JSON body, or the Answer refusing it."""
        content_type = (environ.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            return refused(415, "send Content-Type: application/json")
        length = environ.get("CONTENT_LENGTH") or ""
        if not _ASCII_NUMBER.fullmatch(length):
            return refused(411, "Content-Length required")
        if int(length) > self.max_bytes:
            return refused(413, f"body over {self.max_bytes} bytes (RELMON_INGEST_MAX_BYTES): send smaller batches")
        body = environ["wsgi.input"].read(int(length))
        if len(body) != int(length):
            return refused(400, "body shorter than its Content-Length")
        try:
            return json.loads(body)
        except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            return refused(400, "body is not valid JSON")

    def exchanges(self, decoded: object) -> Answer:
        try:
            exchanges = parse_body(decoded)
        except Refused as error:
            return refused(400, error.problems[0], problems=error.problems)
        if not self.publish(exchanges_entry([exchange.to_task() for exchange in exchanges])):
            return spool_full()
        return Answer(202, {"accepted": len(exchanges), "ids": [exchange.id for exchange in exchanges]})

    def signal(self, decoded: object, exchange_id: str | None, now: float) -> Answer:
        try:
            signal = parse_signal(decoded)
            bot, exchange_id = exchange_key(exchange_id, signal.bot)
        except Refused as error:
            return refused(400, error.problems[0], problems=error.problems)
        received = datetime.fromtimestamp(now, UTC).isoformat()
        kwargs = signal_task(exchange_id, signal, received)
        named = {"bot": bot, "exchange_id": exchange_id, "signal": signal.type}
        if not self.publish(task_entry(task_names.INGEST_SIGNAL, kwargs, named)):
            return spool_full()
        return Answer(202, {"accepted": 1, "id": exchange_id, "type": signal.type})

    def delete(self, environ: dict, exchange_id: str | None) -> Answer:
        bots = parse_qs(environ.get("QUERY_STRING") or "").get("bot") or [None]
        try:
            bot, exchange_id = exchange_key(exchange_id, bots[0])
        except Refused as error:
            return refused(400, error.problems[0], problems=error.problems)
        named = {"bot": bot, "exchange_id": exchange_id}
        if not self.publish(task_entry(task_names.FORGET_EXCHANGE, dict(named), named)):
            return spool_full()
        return Answer(202, {"deleting": exchange_id, "bot": bot})


def spool_full() -> Answer:
    return refused(
        503,
        "relmon's spool is full (Redis or the broker is down): send again later; ids already sent are stored once",
        headers=[("Retry-After", str(SPOOL_FULL_RETRY_SECONDS))],
    )


def route_of(path: str, method: str | None) -> tuple[str, str | None] | None:
    """What a path under /v1/exchanges asks: ("exchanges" | "signal" | "delete", the exchange's id), ("method", ...)
    for a method the path does not take, None for no such path. The id is the rest of the path, percent-decoded
    (WSGI gives it as latin-1 text of its UTF-8 bytes)."""
    if path == INGEST_PATH:
        return ("exchanges", None) if method == "POST" else ("method", None)
    if not path.startswith(INGEST_PATH + "/"):
        return None
    try:
        rest = path[len(INGEST_PATH) + 1 :].encode("latin-1").decode("utf-8")
    except UnicodeError:
        return None
    if not rest:
        return None
    if method == "DELETE":
        return "delete", rest
    if rest.endswith(SIGNALS_SUFFIX) and len(rest) > len(SIGNALS_SUFFIX):
        return ("signal", rest[: -len(SIGNALS_SUFFIX)]) if method == "POST" else ("method", None)
    return "method", None
