"""Celery beat's schedule: the weekly digest, the daily retention purge, and the pipeline's sweeper.

Crontabs run in the team's time zone (RELMON_TIMEZONE), daylight-saving changes included, while the
Celery app itself stays on UTC. The purge runs at 04:30 local time: never in the 01:00–03:00 hours that
daylight-saving changes skip or repeat.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from celery.schedules import crontab

from common import task_names
from store.settings import Settings
from workers.judging.outage import tick_interval
from workers.judging.rules import sweep_interval

PURGE_HOUR, PURGE_MINUTE = 4, 30
TOPICS_HOUR = 5
CHANGE_TICK_SECONDS = 60.0


class zoned_crontab(crontab):  # lower case, like the celery class it extends
    """A crontab whose fields are read in a given IANA time zone rather than the Celery app's.

    Celery normalises "now" and the last run into the schedule's `tz` before matching fields, so overriding
    `tz` is all it takes. The zone travels in `_orig_kwargs`, so beat's pickled schedule file keeps it.
    """

    def __init__(
        self,
        minute: Any = "*",
        hour: Any = "*",
        day_of_week: Any = "*",
        day_of_month: Any = "*",
        month_of_year: Any = "*",
        *,
        timezone: str = "UTC",
        **kwargs: Any,
    ) -> None:
        ZoneInfo(timezone)  # fail at start-up on a zone that does not exist
        self.timezone_name = timezone
        super().__init__(minute, hour, day_of_week, day_of_month, month_of_year, **kwargs)
        self._orig_kwargs = {**kwargs, "timezone": timezone}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.timezone_name = state.pop("timezone", "UTC")
        super().__setstate__(state)
        self._orig_kwargs = {**state, "timezone": self.timezone_name}

    @property
    def tz(self) -> tzinfo:  # type: ignore[override]
        return ZoneInfo(self.timezone_name)

    def __repr__(self) -> str:
        return f"<zoned_crontab: {super().__repr__()[1:-1]} {self.timezone_name}>"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, zoned_crontab):
            return super().__eq__(other) and other.timezone_name == self.timezone_name
        return NotImplemented

    __hash__ = crontab.__hash__


def every(entry: str, task: str, seconds: float) -> dict:
    """A beat entry that runs `task` every `seconds`; a run that waited past the next one is useless."""
    return {entry: {"task": task, "schedule": seconds, "options": {"expires": seconds}}}


def orphan_schedule(lease_seconds: float) -> dict:
    """The orphan check: every half lease (RELMON_VISIBILITY_TIMEOUT)."""
    return every("relmon-requeue-orphans", task_names.REQUEUE_ORPHANS, max(1.0, lease_seconds / 2))


def sweep_schedule(sweep_after_seconds: float) -> dict:
    """The stale-pair sweeper: a sweep every half threshold, at most every 5 minutes, so a lost task is found at
    most 1.5 thresholds after its pair last changed."""
    return every("relmon-requeue-stale", task_names.REQUEUE_STALE, sweep_interval(sweep_after_seconds))


def close_schedule(window_seconds: float) -> dict:
    """Closing the outcome windows that are due: every twentieth of the window, between 1 and 30 seconds."""
    if window_seconds <= 0:
        return {}
    return every("relmon-close-outcome-windows", task_names.CLOSE_DUE_WINDOWS, min(30.0, max(1.0, window_seconds / 20)))


WEEK_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def canary_slot(digest_day: str, digest_hour: int) -> dict:
    """The hour before the digest's (the day before, for a digest at midnight)."""
    if digest_hour > 0:
        return {"hour": digest_hour - 1, "day_of_week": digest_day}
    day = digest_day.lower()[:3]
    before = WEEK_DAYS[(WEEK_DAYS.index(day) - 1) % 7] if day in WEEK_DAYS else digest_day
    return {"hour": 23, "day_of_week": before}


def beat_schedule(settings: Settings) -> dict:
    zone = settings.timezone
    schedule = {
        "relmon-weekly-digest": {
            "task": task_names.SEND_DIGEST,
            "schedule": zoned_crontab(
                minute=0, hour=settings.digest_hour, day_of_week=settings.digest_day, timezone=zone
            ),
            # The run keys its digest by the slot it was scheduled for, not by when it runs (see scheduled_key).
            "kwargs": {"scheduled": True},
            # A digest that could not start within a day is stale; the next week's will come.
            "options": {"expires": 24 * 60 * 60},
        },
        # The canary is re-judged an hour before the digest, which shows its kappa and change.
        "relmon-weekly-canary": {
            "task": task_names.RUN_CANARY,
            "schedule": zoned_crontab(
                minute=0, timezone=zone, **canary_slot(settings.digest_day, settings.digest_hour)
            ),
            "options": {"expires": 24 * 60 * 60},
        },
        # App Home's topics of the last seven days, made once a day after the purge (the digest makes its own).
        "relmon-daily-topics": {
            "task": task_names.REFRESH_TOPICS,
            "schedule": zoned_crontab(minute=0, hour=TOPICS_HOUR, timezone=zone),
            "options": {"expires": 12 * 60 * 60},
        },
        "relmon-purge-old": {
            "task": task_names.PURGE_OLD,
            "schedule": zoned_crontab(minute=PURGE_MINUTE, hour=PURGE_HOUR, timezone=zone),
            "options": {"expires": 12 * 60 * 60},
        },
    }
    schedule.update(orphan_schedule(settings.visibility_timeout_seconds))
    schedule.update(sweep_schedule(settings.sweep_after_seconds))
    schedule.update(close_schedule(settings.outcome_window_seconds))
    # The LLM endpoint down: probe it, then release the answers that waited (workers.judging.outage_tick).
    # Change alerts: each group's failure rate against its own baseline, fed what was judged since the last tick.
    if settings.change_alerts:
        schedule.update(every("relmon-change-alerts", task_names.WATCH_CHANGES, CHANGE_TICK_SECONDS))
    schedule.update(every("relmon-llm-outage", task_names.LLM_OUTAGE_TICK, tick_interval(settings.llm_probe_seconds)))
    return schedule
