"""The listeners' private replies (the "Judging…" note, refusals, stats): through `common.replies`, without the
direct message kept for verdicts."""

from __future__ import annotations

import logging

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from common.messages.verdicts import error_message
from common.replies import Asker, reply_privately

log = logging.getLogger("relmon.replies")


def tell(client: WebClient, asker: Asker, payload: dict) -> None:
    """Reply privately: the response_url, else an ephemeral message; logged when neither works. A rate-limited
    response_url is not waited for: the listeners share Bolt's few threads, and one sleeping out a Retry-After
    could hold up a /judge whose modal must open within 3 seconds."""
    reply_privately(client, asker, payload, wait_rate_limits=False)


def open_view(client: WebClient, asker: Asker, trigger_id: str, view: dict) -> None:
    """A modal for the person who clicked (its trigger_id is valid 3 seconds); Slack refusing it, they are told
    privately to try again."""
    try:
        client.views_open(trigger_id=trigger_id, view=view)
    except SlackApiError as error:
        log.warning("views.open failed", extra={"error": error.response.get("error")})
        tell(client, asker, error_message("unavailable"))
