"""Private replies to one person: on the `response_url` Slack gave with a command, shortcut or button, with
its 429s waited out (Retry-After), else as an ephemeral message in the channel, else (for verdicts only) a
direct message. Used by the bot's listeners, the verdict task and the digest preview.

A response_url answers 404 once expired (30 minutes or 5 posts) and 429 when rate limited; slack_sdk's
WebhookClient returns rather than raises on those, so the status code is checked here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from redis import Redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import ConnectionErrorRetryHandler, RateLimitErrorRetryHandler
from slack_sdk.webhook import WebhookClient

log = logging.getLogger("relmon.replies")

RESPONSE_URL_TIMEOUT_SECONDS = 15
RATE_LIMIT_RETRIES = 3  # each waits the Retry-After Slack sent
CONNECTION_RETRIES = 2
# The channel where /judge was typed, kept for the verdict's ephemeral fallback. Task messages carry the pair
# ID only, so the bot files it here under that ID; a verdict waiting out a long outage may outlive a day.
REPLY_CHANNEL_KEY = "relmon:reply-channel:{pair_id}"
REPLY_CHANNEL_TTL_SECONDS = 7 * 24 * 3600

RESPONSE_URL = "response_url"
EPHEMERAL = "ephemeral"
DIRECT_MESSAGE = "direct_message"
NOWHERE = "nowhere"


@dataclass(frozen=True)
class Asker:
    """Who to answer privately, and where: the request's user, channel and response_url."""

    user_id: str | None
    channel_id: str | None
    response_url: str | None


def webhook_for(response_url: str) -> WebhookClient:
    return WebhookClient(
        response_url,
        timeout=RESPONSE_URL_TIMEOUT_SECONDS,
        retry_handlers=[
            RateLimitErrorRetryHandler(max_retry_count=RATE_LIMIT_RETRIES),
            ConnectionErrorRetryHandler(max_retry_count=CONNECTION_RETRIES),
        ],
    )


def post_to_response_url(response_url: str, payload: dict) -> bool:
    """True once Slack took the message (200); False when it refused it (expired, used up, still rate
    limited after the retries) or could not be reached."""
    try:
        response = webhook_for(response_url).send(
            text=payload["text"], blocks=payload.get("blocks"), response_type="ephemeral", replace_original=False
        )
    except Exception as error:  # a network failure after the connection retries
        log.info("response_url unreachable", extra={"error": repr(error)[:200]})
        return False
    if response.status_code == 200:
        return True
    # The body is Slack's short reason (expired_url, used_url, …), never the person's text.
    log.info("response_url refused the reply", extra={"status": response.status_code, "reason": response.body[:80]})
    return False


def reply_privately(client: WebClient | None, asker: Asker, payload: dict, *, direct_message_last: bool = False) -> str:
    """Tell one person `payload` ({text, blocks}) so only they see it; returns where it went.

    A direct message is a last resort for what the person waits for (a verdict), not for short notes."""
    if asker.response_url and post_to_response_url(asker.response_url, payload):
        return RESPONSE_URL
    if client is not None and asker.user_id and asker.channel_id:
        try:
            client.chat_postEphemeral(
                channel=asker.channel_id, user=asker.user_id, text=payload["text"], blocks=payload.get("blocks")
            )
            return EPHEMERAL
        except SlackApiError as error:  # not in the channel (a DM, relmon or the person left): next option
            log.info(
                "ephemeral reply failed", extra={"channel": asker.channel_id, "error": error.response.get("error")}
            )
    if direct_message_last and client is not None and asker.user_id:
        client.chat_postMessage(channel=asker.user_id, unfurl_links=False, **payload)
        return DIRECT_MESSAGE
    log.warning("could not reply privately", extra={"user": asker.user_id, "channel": asker.channel_id})
    return NOWHERE


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
