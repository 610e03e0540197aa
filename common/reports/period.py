"""Digest periods: a digest covers the seven days up to the moment it is sent,
compared with the seven days before; its key is the ISO week in which it is sent, in the digest's time zone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo

WINDOW = timedelta(days=7)


@dataclass(frozen=True)
class Period:
    key: str  # "2026-W48" (or "2026-W48+force-<timestamp>" for a forced digest)
    start: datetime  # inclusive, UTC
    end: datetime  # exclusive, UTC: the moment the digest is made
    previous_start: datetime  # the comparison week is [previous_start, start)
    timezone: str
    title: str | None = None  # what the report is, when not the weekly digest (a history read by backfill or import)

    @property
    def tz(self) -> tzinfo:
        return ZoneInfo(self.timezone)

    @property
    def compared_days(self) -> int:
        """How many days the comparison period spans (7 for a digest; as long as the period read for a history)."""
        return max(1, round((self.start - self.previous_start) / timedelta(days=1)))

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


WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def latest_slot(now: datetime, weekday: str, hour: int, timezone: str = "UTC") -> datetime:
    """The latest scheduled digest moment (`weekday` at `hour`:00 in `timezone`) at or before `now`, in UTC."""
    tz = ZoneInfo(timezone)
    local = now.astimezone(tz)
    days_back = (local.weekday() - WEEKDAYS.index(weekday)) % 7
    slot = datetime.combine(local.date() - timedelta(days=days_back), time(hour), tzinfo=tz)
    if slot > local:
        slot -= timedelta(days=7)
    return slot.astimezone(UTC)


# Beat sends the digest when its own clock reaches the slot; a worker on another machine whose clock runs a little
# behind must still count the slot as come, or it would take last week's key (already sent) and skip this week.
CLOCK_GRACE = timedelta(minutes=10)


def scheduled_key(now: datetime, weekday: str, hour: int, timezone: str = "UTC") -> str:
    """The key of the scheduled digest a run at `now` belongs to: the ISO week of its slot, not of `now`. A task
    that comes back late (a retry, or a redelivery after the broker's visibility timeout) across the week's
    boundary (a Sunday-night schedule, say) still finishes its own week's digest instead of sending next week's."""
    return iso_week_key(latest_slot(now + CLOCK_GRACE, weekday, hour, timezone), ZoneInfo(timezone))


DAY = timedelta(days=1)


def _days(period: Period) -> int:
    return max(1, -(-(period.end - period.start) // DAY))


def day_slices(period: Period) -> list[tuple[datetime, datetime]]:
    """The 24-hour slices of the period (seven for a week, more for a backfill's month), oldest first."""
    return [(period.start + i * DAY, period.start + (i + 1) * DAY) for i in range(_days(period))]


def slice_of(period: Period, moment: datetime) -> int | None:
    """The index of the slice of `day_slices` that `moment` falls in; None outside them all."""
    index = (moment - period.start) // DAY
    return index if 0 <= index < _days(period) else None
