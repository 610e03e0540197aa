"""The one place relmon's outputs for people learn channels' names: the names stored (`store.channel_names`, from
an export's channels.json or an earlier look-up), and for the others Slack's conversations.info when a bot token
is set (each name found is stored, so the next command, and one without a token, knows it too). A channel no
source names is shown by its ID."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from slack_sdk import WebClient

from capture.directory import LOOKUP_ERRORS
from common.messages.readable import Readable
from common.runtime import Runtime
from store import channel_names as stored
from store.db import Database

log = logging.getLogger("relmon.channel_names")

MAX_LOOKUPS = 100  # conversations.info calls one output may make (Tier 3: about 50 a minute)


def channel_names(
    database: Database, channel_ids: Iterable[str | None], slack: WebClient | None, *, keep: bool = True
) -> dict[str, str]:
    """ID → name of these channels: stored, else asked of Slack (`slack` None: not asked; a refusal or an
    unreachable Slack leaves the channel unnamed, and stops the asking). `keep` False: what Slack says is not
    stored (a dry run writes nothing)."""
    ids = sorted({c for c in channel_ids if c})
    with database.reading() as session:
        names = stored.known(session, ids)
    missing = [c for c in ids if c not in names]
    if not missing or slack is None:
        return names
    learnt: dict[str, str] = {}
    for channel_id in missing[:MAX_LOOKUPS]:
        try:
            info = slack.conversations_info(channel=channel_id).get("channel")
        except LOOKUP_ERRORS as error:
            log.info("channel %s: conversations.info failed (%s): shown by its ID", channel_id, error)
            if isinstance(error, OSError):  # Slack unreachable: the next would wait as long
                break
            continue
        name = info.get("name") if isinstance(info, dict) else None
        if isinstance(name, str) and name:
            learnt[channel_id] = name
    if learnt and keep:
        with database.session() as session:
            stored.remember(session, learnt, stored.SLACK)
    return names | learnt


def readable_for(
    runtime: Runtime, channel_ids: Iterable[str | None], *, ask_slack: bool = True, keep: bool = True
) -> Readable:
    """How `runtime`'s outputs name these channels and show times (the team's zone). `ask_slack` False: only the
    names stored (the digest's dry run touches no Slack); `keep` False: names Slack gives are not stored."""
    settings = runtime.settings
    slack = runtime.slack if ask_slack and settings.slack_bot_token else None
    return Readable(settings.timezone, channel_names(runtime.db, channel_ids, slack, keep=keep))
