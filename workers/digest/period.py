"""Digest periods (DESIGN.md "Digest periods"): a digest covers the seven days up to the moment it is sent,
compared with the seven days before; its key is the ISO week in which it is sent, in the digest's time zone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from zoneinfo import ZoneInfo

WINDOW = timedelta(days=7)


@dataclass(frozen=True)
class Period:
    key: str  # "2026-W48" (or "2026-W48+force-<timestamp>" for a forced digest)
    start: datetime  # inclusive, UTC
    end: datetime  # exclusive, UTC: the moment the digest is made
    previous_start: datetime  # the comparison week is [previous_start, start)
    timezone: str

    @property
    def tz(self) -> tzinfo:
        return ZoneInfo(self.timezone)

    @property
    def week_key(self) -> str:
        """The ISO week part of the key, without any +force suffix."""
        return self.key.split("+", 1)[0]


def iso_week_key(moment: datetime, tz: tzinfo) -> str:
    year, week, _ = moment.astimezone(tz).isocalendar()
    return f"{year}-W{week:02d}"


def period_for(now: datetime, timezone: str = "UTC", *, force: bool = False) -> Period:
    """The period of a digest made at `now` (an aware datetime). A forced digest gets a key of its own."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    end = now.astimezone(UTC)
    key = iso_week_key(end, ZoneInfo(timezone))
    if force:
        key = f"{key}+force-{end.strftime('%Y%m%dT%H%M%S')}"
    return Period(key=key, start=end - WINDOW, end=end, previous_start=end - 2 * WINDOW, timezone=timezone)


def day_slices(period: Period) -> list[tuple[datetime, datetime]]:
    """Seven 24-hour slices of the period, oldest first (the chart's days)."""
    return [(period.start + timedelta(days=i), period.start + timedelta(days=i + 1)) for i in range(7)]
