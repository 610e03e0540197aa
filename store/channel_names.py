"""Channels' names, so that what a person reads says `#support`, not `#C0SUPPORT1`: learnt from an export's
channels.json (`relmon import`) and from Slack's conversations.info (`common.channel_names`), one row a channel,
the newest name winning (a channel renamed in Slack is renamed here the next time it is looked up)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.db import dialect_insert
from store.models import ChannelName

EXPORT = "export"
SLACK = "slack"
NAME_CHARS = 255  # Slack's names are at most 80 characters: anything longer is cut, not refused


def remember(session: Session, names: Mapping[str, str], source: str, now: datetime | None = None) -> None:
    """Store each channel's name (ID → name, without `#`), replacing what was stored for it."""
    moment = now or datetime.now(UTC)
    rows = [
        {"channel_id": channel_id, "name": name.removeprefix("#")[:NAME_CHARS], "source": source, "updated_at": moment}
        for channel_id, name in sorted(names.items())
        if channel_id and name and name.removeprefix("#")
    ]
    if not rows:
        return
    insert = dialect_insert(session)(ChannelName)
    statement = insert.on_conflict_do_update(
        index_elements=["channel_id"],
        set_={"name": insert.excluded.name, "source": insert.excluded.source, "updated_at": insert.excluded.updated_at},
    )
    session.execute(statement, rows)


def known(session: Session, channel_ids: Iterable[str] | None = None) -> dict[str, str]:
    """The stored names (ID → name): of these channels, or of every channel known when None."""
    query = select(ChannelName.channel_id, ChannelName.name)
    if channel_ids is not None:
        wanted = sorted({c for c in channel_ids if c})
        if not wanted:
            return {}
        query = query.where(ChannelName.channel_id.in_(wanted))
    return {channel_id: name for channel_id, name in session.execute(query).all()}
