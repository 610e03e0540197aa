"""The listeners' private replies (the "Judging…" note, refusals, stats): through `common.replies`, without the
direct message kept for verdicts."""

from __future__ import annotations

from slack_sdk import WebClient

from common.replies import Asker, reply_privately


def tell(client: WebClient, asker: Asker, payload: dict) -> None:
    """Reply privately: the response_url, else an ephemeral message; logged when neither works. A rate-limited
    response_url is not waited for: the listeners share Bolt's few threads, and one sleeping out a Retry-After
    could hold up a /judge whose modal must open within 3 seconds."""
    reply_privately(client, asker, payload, wait_rate_limits=False)
