"""Private replies to one person: on the `response_url` Slack gave with a command, shortcut or button, else
as an ephemeral message in the channel, else (for verdicts only) a direct message. Used by the bot's listeners,
the verdict task and the digest preview.

A response_url answers 404 once expired (30 minutes or 5 posts) and 429 when rate limited; slack_sdk's
WebhookClient returns rather than raises on those, so the status code is checked here. A 429's Retry-After is
waited out (three times at most) only when the caller may wait: the Celery tasks may, the bot's listeners may
not (they share Bolt's few threads, and a /judge queued behind a sleeping one would open its modal after the
3-second trigger_id expired), so there a 429 falls back to the ephemeral at once.

Each reply is sent once. A post is "refused" when Slack answered it with an error status (nothing was shown)
and "unsent" when no connection could be made (DNS, refused, TLS, or the connect timed out): only then does
the next channel get it, and only the unsent post is retried. When the request went out whole but no answer
came (a timeout, or the connection closed after the post), Slack may have shown it: its outcome is unknown,
and it is neither posted again nor sent anywhere else. urllib draws that line for us: whatever fails while
connecting or sending is raised as a URLError, whatever fails while waiting for the answer comes as is.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.client import HTTPException
from urllib.error import HTTPError, URLError

from redis import Redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.webhook import WebhookClient

from common.post_once import outcome_unknown

log = logging.getLogger("relmon.replies")

RESPONSE_URL_TIMEOUT_SECONDS = 15
RATE_LIMIT_RETRIES = 3  # each waits the Retry-After Slack sent (Celery tasks only)
CONNECTION_RETRIES = 2  # of a request that could not be sent at all
# The channel where /judge was typed, kept for the verdict's ephemeral fallback. Task messages carry the pair
# ID only, so the bot files it here under that ID; a verdict waiting out a long outage may outlive a day.
REPLY_CHANNEL_KEY = "relmon:reply-channel:{pair_id}"
REPLY_CHANNEL_TTL_SECONDS = 7 * 24 * 3600
RESPONSE_URL_KEY = "relmon:response-url:{key_id}"
RESPONSE_URL_TTL_SECONDS = 30 * 60  # Slack honours a response_url this long

RESPONSE_URL = "response_url"
RESPONSE_URL_UNCONFIRMED = "response_url_unconfirmed"  # posted, but Slack's answer never came: not sent again
EPHEMERAL = "ephemeral"
EPHEMERAL_UNCONFIRMED = "ephemeral_unconfirmed"  # the same, for the ephemeral message
DIRECT_MESSAGE = "direct_message"
DIRECT_MESSAGE_UNCONFIRMED = "direct_message_unconfirmed"  # the same, for the direct message
NOWHERE = "nowhere"

# What became of a post to a response_url.
TAKEN = "taken"  # a 2xx answer
REFUSED = "refused"  # an error status (expired, used up, still rate limited…): nothing shown
UNSENT = "unsent"  # no connection could be made: nothing sent
UNKNOWN = "unknown"  # sent whole, no answer: Slack may have shown it


@dataclass(frozen=True)
class Asker:
    """Who to answer privately, and where: the request's user, channel and response_url."""

    user_id: str | None
    channel_id: str | None
    response_url: str | None


def _not_sent(error: BaseException | None) -> bool:
    """urllib raises a URLError (not an HTTPError: that is an answer) only when the request could not be
    sent whole: resolving, connecting, the TLS handshake or writing the request failed."""
    return isinstance(error, URLError) and not isinstance(error, HTTPError)


class UnsentRetryHandler(RetryHandler):
    """Retries a request that never left (slack_sdk's ConnectionErrorRetryHandler also retries a connection
    closed after the request was sent, which would post the same reply twice)."""

    def _can_retry(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        return response is None and _not_sent(error)


def webhook_for(response_url: str, *, wait_rate_limits: bool = True) -> WebhookClient:
    handlers: list[RetryHandler] = [UnsentRetryHandler(max_retry_count=CONNECTION_RETRIES)]
    if wait_rate_limits:
        handlers.insert(0, RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES))
    return WebhookClient(response_url, timeout=RESPONSE_URL_TIMEOUT_SECONDS, retry_handlers=handlers)


def post_to_response_url(response_url: str, payload: dict, *, wait_rate_limits: bool = True) -> str:
    """TAKEN, REFUSED, UNSENT or UNKNOWN (see above). `wait_rate_limits`: sleep out a 429's Retry-After."""
    try:
        response = webhook_for(response_url, wait_rate_limits=wait_rate_limits).send(
            text=payload["text"], blocks=payload.get("blocks"), response_type="ephemeral", replace_original=False
        )
    except Exception as error:  # never the URL or the text in the logs: the error's type is enough
        if outcome_unknown(error):
            log.info("response_url did not answer", extra={"error": type(error).__name__})
            return UNKNOWN
        log.info("response_url unreachable", extra={"error": type(error).__name__})
        return UNSENT
    if 200 <= response.status_code < 300:
        return TAKEN
    # The body is Slack's short reason (expired_url, used_url, …), never the person's text.
    log.info("response_url refused the reply", extra={"status": response.status_code, "reason": response.body[:80]})
    return REFUSED


def reply_privately(
    client: WebClient | None,
    asker: Asker,
    payload: dict,
    *,
    direct_message_last: bool = False,
    wait_rate_limits: bool = True,
    on_posted: Callable[[str | None, str | None], None] | None = None,
) -> str:
    """Tell one person `payload` ({text, blocks}) so only they see it, once; returns where it went.

    A direct message is a last resort for what the person waits for (a verdict), not for short notes.
    `wait_rate_limits=False` (the bot's listeners): a rate-limited response_url is not waited for.
    RESPONSE_URL_UNCONFIRMED (and EPHEMERAL_ and DIRECT_MESSAGE_UNCONFIRMED): sent whole but never answered;
    not sent again, there or anywhere else. A Web API call that could not be sent at all raises: the caller's
    retry sends it. `on_posted(channel, ts)`: told where a direct message went (the only reply that stays)."""
    if asker.response_url:
        outcome = post_to_response_url(asker.response_url, payload, wait_rate_limits=wait_rate_limits)
        if outcome == TAKEN:
            return RESPONSE_URL
        if outcome == UNKNOWN:  # Slack may be showing it already: a second copy elsewhere would be a duplicate
            log.warning(
                "reply outcome unknown, not sent again", extra={"user": asker.user_id, "channel": asker.channel_id}
            )
            return RESPONSE_URL_UNCONFIRMED
    if client is not None and asker.user_id and asker.channel_id:
        try:
            with _unanswered_is(asker, EPHEMERAL_UNCONFIRMED) as unanswered:
                client.chat_postEphemeral(
                    channel=asker.channel_id, user=asker.user_id, text=payload["text"], blocks=payload.get("blocks")
                )
            return unanswered.outcome or EPHEMERAL
        except SlackApiError as error:  # not in the channel (a DM, relmon or the person left): next option
            log.info(
                "ephemeral reply failed", extra={"channel": asker.channel_id, "error": error.response.get("error")}
            )
    if direct_message_last and client is not None and asker.user_id:
        with _unanswered_is(asker, DIRECT_MESSAGE_UNCONFIRMED) as unanswered:
            posted = client.chat_postMessage(channel=asker.user_id, unfurl_links=False, **payload)
            if on_posted is not None:
                on_posted(posted.get("channel"), posted.get("ts"))
        return unanswered.outcome or DIRECT_MESSAGE
    log.warning("could not reply privately", extra={"user": asker.user_id, "channel": asker.channel_id})
    return NOWHERE


@dataclass
class _Unanswered:
    outcome: str | None = None


@contextmanager
def _unanswered_is(asker: Asker, outcome: str) -> Iterator[_Unanswered]:
    """A Web API post sent whole but never answered (a timeout, the connection closed after sending) may be
    showing already: it is settled as `outcome`, not raised for a retry that would send a second copy."""
    unanswered = _Unanswered()
    try:
        yield unanswered
    except (OSError, HTTPException) as error:
        if not outcome_unknown(error):
            raise  # never sent: the caller's retry sends it
        log.warning(
            "reply outcome unknown, not sent again",
            extra={"user": asker.user_id, "channel": asker.channel_id, "via": outcome, "error": repr(error)[:200]},
        )
        unanswered.outcome = outcome


def keep_response_url(redis: Redis, response_url: str | None) -> str | None:
    """Keep a response_url in Redis for its 30-minute life and return the ID a task carries instead: a task's
    arguments show in its message, its repr and the logs of a failure, and a response_url is a credential."""
    if not response_url:
        return None
    key_id = secrets.token_hex(12)
    redis.set(RESPONSE_URL_KEY.format(key_id=key_id), response_url, ex=RESPONSE_URL_TTL_SECONDS)
    return key_id


def response_url_of(redis: Redis, key_id: str | None) -> str | None:
    """The response_url kept under `key_id` (None: none, or its life is over)."""
    value = redis.get(RESPONSE_URL_KEY.format(key_id=key_id)) if key_id else None
    return value.decode() if isinstance(value, bytes) else value


def remember_reply_channel(redis: Redis, pair_id: int, channel_id: str | None) -> None:
    if channel_id:
        redis.set(REPLY_CHANNEL_KEY.format(pair_id=pair_id), channel_id, ex=REPLY_CHANNEL_TTL_SECONDS)


def reply_channel(redis: Redis, pair_id: int) -> str | None:
    try:
        value = redis.get(REPLY_CHANNEL_KEY.format(pair_id=pair_id))
    except Exception as error:  # Redis down: the answer's own channel, else a DM, still reach the person
        log.info("reply channel unknown", extra={"pair_id": pair_id, "error": repr(error)[:200]})
        return None
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)
