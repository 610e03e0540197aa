"""Digest periods: a digest covers the seven days up to the moment it is sent,
compared with the seven days before; its key is the ISO week in which it is sent, in the digest's time zone."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
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
        """How many days the comparison period spans, whole (7 for a digest; as long as the period read for a
        history, which starts and ends at the team's local hours)."""
        return max(1, round((self.start - self.previous_start) / DAY))

    @property
    def before(self) -> str:
        """What the comparison period is called: `the week before` for a digest's seven days, else (a backfill's
        month) `the 30 days before`."""
        days = self.compared_days
        return "the week before" if days == 7 else f"the {days} day{'s' if days != 1 else ''} before"

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


DAY = timedelta(days=1)
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


def calendar_days(start: datetime, end: datetime, tz: tzinfo) -> list[date]:
    """The calendar days, in `tz`, that [start, end) touches, oldest first: a week from Monday 09:00 to Monday
    09:00 touches eight (both Mondays partly), a day across a daylight-saving change lasts 23 or 25 hours."""
    first = start.astimezone(tz).date()
    last = max(first, (end - timedelta(microseconds=1)).astimezone(tz).date())
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def count_per_day(moments: Iterable[datetime], tz: tzinfo, days: Sequence[date]) -> dict[date, int]:
    """How many of `moments` fall on each of `days`, each counted on the calendar day it is in `tz` (a question
    asked at 02:00 UTC on a Saturday is Friday evening's in Los Angeles); moments on other days are left out."""
    counts = dict.fromkeys(days, 0)
    for moment in moments:
        day = moment.astimezone(tz).date()
        if day in counts:
            counts[day] += 1
    return counts


class DayIndex:
    """The period's calendar days in its time zone, and which of them a moment falls on: how the daily tallies,
    fed one row at a time, place each answer (the same rule as `count_per_day`)."""

    def __init__(self, period: Period) -> None:
        self.tz = period.tz
        self.days = calendar_days(period.start, period.end, self.tz)
        self._index = {day: i for i, day in enumerate(self.days)}
        self._start, self._end = period.start, period.end

    def of(self, moment: datetime) -> int | None:
        """The index in `days` of the calendar day `moment` falls on; None when that day is not one of them."""
        return self._index.get(moment.astimezone(self.tz).date())

    def of_answer(self, asked_at: datetime, created_at: datetime) -> int | None:
        """An answer's day: the day its question was asked, or, for a question asked on a day before the period
        (answered in it), the answer's own day; None for an answer outside the period."""
        if not self._start <= created_at < self._end:
            return None
        index = self.of(asked_at)
        return index if index is not None else self.of(created_at)
