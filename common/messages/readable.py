"""What a person reads instead of what Slack stores: a channel's name (`#support`) instead of its ID, a local time
in the team's time zone (`Mon 7 Dec 14:02`) instead of a message's ts. Pure: the names are looked up by the caller
(`common.channel_names`), the zone is `settings.timezone`. Machine outputs (`--json`) keep the IDs and the raw ts
and may add these as extra fields."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from store import bot_groups


def ts_moment(ts: str | float | None) -> datetime | None:
    """A Slack ts (`1796477420.000000`) as an aware UTC datetime; None when it is not one."""
    if ts is None:
        return None
    try:
        return datetime.fromtimestamp(float(ts), UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def short_time(moment: datetime, timezone: str) -> str:
    """`Mon 7 Dec 14:02`: a moment as the team's clock showed it (no zone: the report's heading names it)."""
    local = moment.astimezone(ZoneInfo(timezone))
    return f"{local:%a} {local.day} {local:%b %H:%M}"


def short_date(moment: datetime, timezone: str) -> str:
    """`2026-11-02`: the team's day of a moment."""
    return f"{moment.astimezone(ZoneInfo(timezone)):%Y-%m-%d}"


@dataclass(frozen=True)
class Readable:
    """How channels and times are shown to people: the names known (ID → name, no `#`) and the team's zone."""

    timezone: str = "UTC"
    names: Mapping[str, str] = field(default_factory=dict)

    def channel(self, channel_id: str | None) -> str:
        """`#support`; `#C0SUPPORT1` when no name is known; "all channels" for None (every channel together)."""
        if channel_id is None:
            return "all channels"
        bot = bot_groups.bot_of(channel_id)
        if bot is not None:
            return bot_groups.label(bot)
        return f"#{self.names.get(channel_id) or channel_id}"

    def name(self, channel_id: str | None) -> str | None:
        """The channel's name without `#`, or None when unknown (the extra field of a JSON output)."""
        return self.names.get(channel_id) if channel_id else None

    def time(self, ts: str | float | None) -> str:
        """`Mon 7 Dec 14:02` in the team's zone; the ts itself when it is not a time."""
        moment = ts_moment(ts)
        return short_time(moment, self.timezone) if moment is not None else f"ts {ts}"

    def iso(self, ts: str | float | None) -> str | None:
        """`2026-12-07T14:02:00+01:00`: a ts as local ISO time with its offset (the extra field of a JSON output)."""
        moment = ts_moment(ts)
        return moment.astimezone(ZoneInfo(self.timezone)).isoformat(timespec="seconds") if moment else None
