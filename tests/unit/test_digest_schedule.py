"""Beat's schedule: the weekly digest at the configured local day and hour (daylight saving included),
the purge outside 01:00–03:00, the pipeline's sweeper, and a schedule that survives beat's pickled state."""

from __future__ import annotations

import pickle
from datetime import UTC, datetime

import pytest
from celery import Celery

from store.settings import Settings
from workers.schedule import beat_schedule, zoned_crontab

app = Celery("schedule-test")
app.conf.timezone = "UTC"


def next_run(schedule: zoned_crontab, last_run: datetime, now: datetime) -> datetime:
    schedule.app = app
    schedule.nowfun = lambda: now
    return now + schedule.remaining_estimate(last_run)


def test_weekly_digest_runs_at_local_time_in_a_non_utc_zone() -> None:
    settings = Settings(_env_file=None, digest_day="wednesday", digest_hour=8, timezone="America/New_York")
    entry = beat_schedule(settings)["relmon-weekly-digest"]
    assert entry["task"] == "workers.tasks.digest.send_digest"
    assert entry["kwargs"] == {"scheduled": True}  # the run is keyed by its slot (see scheduled_key)
    digest = entry["schedule"]
    assert digest.timezone_name == "America/New_York" and digest.hour == {8} and digest.day_of_week == {3}
    # Winter (EST, UTC-5): Wednesday 08:00 local is 13:00 UTC.
    winter = next_run(digest, datetime(2026, 1, 7, 13, 0, tzinfo=UTC), datetime(2026, 1, 9, tzinfo=UTC))
    assert winter == datetime(2026, 1, 14, 13, 0, tzinfo=UTC)
    # Across the March change to EDT (UTC-4) the local hour holds: 12:00 UTC.
    spring = next_run(digest, datetime(2026, 3, 4, 13, 0, tzinfo=UTC), datetime(2026, 3, 6, tzinfo=UTC))
    assert spring == datetime(2026, 3, 11, 12, 0, tzinfo=UTC)
    due, _ = digest.is_due(datetime(2026, 3, 4, 13, 0, tzinfo=UTC))
    assert not due


def test_the_default_digest_is_monday_nine_utc() -> None:
    schedule = beat_schedule(Settings(_env_file=None))
    digest = schedule["relmon-weekly-digest"]["schedule"]
    assert digest.timezone_name == "UTC" and digest.hour == {9} and digest.minute == {0} and digest.day_of_week == {1}


def test_the_purge_avoids_the_dst_hours() -> None:
    schedule = beat_schedule(Settings(_env_file=None))
    purge = schedule["relmon-purge-old"]
    assert purge["task"] == "workers.tasks.maintenance.purge_old"
    assert all(not 1 <= hour <= 3 for hour in purge["schedule"].hour)


def test_the_stale_sweeper_is_scheduled() -> None:
    schedule = beat_schedule(Settings(_env_file=None))
    assert schedule["relmon-requeue-stale"]["task"] == "workers.tasks.judging.requeue_stale"


def test_schedule_survives_beats_pickled_state() -> None:
    digest = beat_schedule(Settings(_env_file=None, timezone="Asia/Tokyo"))["relmon-weekly-digest"]["schedule"]
    restored = pickle.loads(pickle.dumps(digest))
    assert restored == digest and restored.timezone_name == "Asia/Tokyo"
    assert restored != zoned_crontab(minute=0, hour=9, day_of_week="mon", timezone="UTC")


def test_the_team_time_zone_is_read_under_its_name_and_its_older_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELMON_DIGEST_TIMEZONE", "Europe/Paris")
    assert Settings(_env_file=None).timezone == "Europe/Paris"
    monkeypatch.setenv("RELMON_TIMEZONE", "Asia/Tokyo")
    assert Settings(_env_file=None).timezone == "Asia/Tokyo"


def test_an_unknown_time_zone_is_refused_with_what_to_write() -> None:
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Base': use an IANA name"):
        Settings(_env_file=None, timezone="Mars/Base")
