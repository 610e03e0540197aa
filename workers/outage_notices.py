"""The alert channels hear of an LLM outage twice: once when judging pauses, once when it resumes with how many
answers waited (the outage itself: workers.judging.outage). Each notice is posted at most once per alert channel,
by the post-once protocol: a row in `alerts` claimed under the notice's key, then the marked post."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from slack_sdk.errors import SlackApiError

from common.runtime import Runtime
from store import alerts as alert_store
from store.rules import ChannelRules
from store.settings import Settings
from workers.alerts.delivery import alert_post_once, earlier_post, refused_for_good
from workers.judging.outage import Outage, paused_text, resumed_text

log = logging.getLogger("relmon.alerts")

KIND_OUTAGE = "llm_outage"
NOTICE_KINDS = ("paused", "resumed")


def alert_channels(rules: ChannelRules, settings: Settings) -> list[str]:
    """Every alert channel in use: the default one and any a channel's rule names, each once, in that order."""
    found = [rules.for_channel(None, settings).alert_channel]
    found += [rules.for_channel(channel, settings).alert_channel for channel in rules.channels]
    return list(dict.fromkeys(channel for channel in found if channel))


def notice_key(kind: str, since: float, channel: str) -> str:
    """One notice of each kind per outage and alert channel."""
    return f"outage:{kind}:{since:.3f}:{channel}"


def notice_text(kind: str, down: Outage, *, waited: int, at: float, per_minute: float) -> str:
    if kind == "paused":
        return paused_text(down)
    return resumed_text(down.since, at, waited, per_minute)


def post_notice(runtime: Runtime, kind: str, since: float, failure: str, *, waited: int = 0, at: float = 0.0) -> int:
    """Post the notice in every alert channel that has not had it; returns how many posts this call made."""
    if kind not in NOTICE_KINDS:
        raise ValueError(f"unknown outage notice {kind!r}")
    settings = runtime.settings
    text = notice_text(
        kind, Outage(since, failure), waited=waited, at=at or since, per_minute=settings.llm_resume_per_minute
    )
    channels = alert_channels(runtime.rules, settings)
    if not channels:
        log.warning("LLM outage notice not posted: no alert channel (RELMON_ALERT_CHANNEL)", extra={"kind": kind})
        return 0
    posted = 0
    for channel in channels:
        key = notice_key(kind, since, channel)
        with runtime.db.session() as session:
            row, _created = alert_store.claim_alert(
                session,
                dedupe_key=key,
                kind=KIND_OUTAGE,
                alert_channel_id=channel,
                details={"notice": kind, "failure": failure, "waited": waited},
            )
            alert_id, status, claimed_at = row.id, row.status, row.created_at
        if status != alert_store.STATUS_CLAIMED:
            continue
        once = alert_post_once(runtime, key)
        claimed = claimed_at if claimed_at.tzinfo else claimed_at.replace(tzinfo=UTC)
        earlier = earlier_post(runtime, once, channel, claimed)
        if earlier is not None:
            with runtime.db.autocommit() as connection:
                alert_store.mark_alert_posted(connection, alert_id, earlier or None)
            continue
        try:
            response = once.post(channel, text=text, unfurl_links=False, unfurl_media=False)
        except SlackApiError as error:
            refused_for_good(runtime, alert_id, error, "LLM outage notice not posted", alert_id=alert_id)
            continue
        with runtime.db.autocommit() as connection:
            alert_store.mark_alert_posted(connection, alert_id, response.get("ts"), datetime.now(UTC))
        posted += 1
        log.info("LLM outage notice posted", extra={"kind": kind, "alert_channel": channel, "alert_id": alert_id})
    return posted
