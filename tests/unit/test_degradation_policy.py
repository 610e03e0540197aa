"""The degradation policy as plain data in, decision out: the count and time windows over the latest scores, the
floor, re-arming and episodes, each channel's own limits, and delivery under the alert channel's cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from store.rules import ChannelRules
from store.settings import Settings
from workers.alerts.policy import (
    WINDOW_ANSWERS,
    WINDOW_MINUTES,
    Action,
    Decision,
    DegradationState,
    DegradationWindow,
    ScoredAt,
    decide_degradation,
    decide_degradation_delivery,
    rolling_sample,
    time_sample,
)

NOW = datetime(2026, 11, 27, 14, 30, tzinfo=UTC)


def scores(*values: float, minutes_apart: float = 10, start: datetime = NOW) -> list[ScoredAt]:
    """Newest first: values[0] is the latest."""
    return [ScoredAt(v, start - timedelta(minutes=minutes_apart * i)) for i, v in enumerate(values)]


QUIET = scores(1, 1, 4, 4, 4, minutes_apart=60 * 24)
BUSY = scores(*([1.0] * 30), minutes_apart=1)


def test_the_count_window_is_the_last_answers():
    assert rolling_sample(list(reversed(QUIET)), window=3) == [1, 1, 4]  # newest first, order of input irrelevant
    assert rolling_sample(BUSY, window=20) == [1.0] * 20


def test_the_time_window_is_the_last_minutes():
    assert time_sample(QUIET, 60, NOW) == [1]  # a day apart: only the newest is in the last hour
    assert len(time_sample(BUSY, 60, NOW)) == 30


def test_a_time_window_of_zero_minutes_is_off():
    assert time_sample(BUSY, 0, NOW) == []


HOUR_WINDOW = DegradationWindow(answers=20, minutes=60, min_answers=5)


def test_eight_bad_answers_in_the_last_hour_alert_before_the_count_window_fills():
    """The audit's first probe: window 20, floor 2.5, 8 answers in the last hour all scoring 0. The count window
    alone said too_few_answers; the last hour's mean trips the floor."""
    recent = scores(*([0] * 8), minutes_apart=5)
    assert decide_degradation(recent, window=20, floor=2.5, state=DegradationState(), now=NOW).reason == (
        "too_few_answers"  # count window only (the time window off), as before
    )
    decision = decide_degradation(recent, window=HOUR_WINDOW, floor=2.5, state=DegradationState(), now=NOW)
    assert (decision.action, decision.reason, decision.window) == (Action.ALERT, "below_floor", WINDOW_MINUTES)
    assert (decision.mean, decision.count) == (0, 8)


def test_a_sharp_drop_in_a_quiet_channel_trips_the_time_window():
    """The audit's second probe: 20 answers spread over 5 days, the newest at 0. The last-20 mean (3.2) hides the
    drop; the last hour, once it holds the minimum sample, shows it."""
    old = [ScoredAt(4, NOW - timedelta(hours=6 * (i + 1))) for i in range(16)]
    for minimum, action, reason in ((5, Action.NONE, "healthy"), (4, Action.ALERT, "below_floor")):
        recent = old + scores(0, 0, 0, 0, minutes_apart=10)  # the 4 newest, in the last hour
        window = DegradationWindow(answers=20, minutes=60, min_answers=minimum)
        decision = decide_degradation(recent, window=window, floor=2.5, state=DegradationState(), now=NOW)
        assert (decision.action, decision.reason) == (action, reason), minimum
    assert decision.window == WINDOW_MINUTES and decision.mean == 0 and decision.count == 4
    assert [(m.kind, m.mean) for m in decision.means] == [(WINDOW_ANSWERS, 3.2), (WINDOW_MINUTES, 0)]
    # with a fifth bad answer in the hour the default minimum of 5 is met too
    recent = old[1:] + scores(0, 0, 0, 0, 0, minutes_apart=10)
    assert decide_degradation(recent, window=HOUR_WINDOW, floor=2.5, state=DegradationState(), now=NOW).action is (
        Action.ALERT
    )


@pytest.mark.parametrize(
    ("recent", "state", "action", "reason", "window"),
    [
        # the count window trips on its own: a quiet hour
        (scores(1, 1, 1, 1, minutes_apart=120), DegradationState(), Action.ALERT, "below_floor", WINDOW_ANSWERS),
        # both trip: the lower mean is reported
        (scores(0, 4, 0, 4, 0, 0, 0, 0, minutes_apart=5), DegradationState(), Action.ALERT, "below_floor",
         WINDOW_MINUTES),  # last 4: 2.0; the hour: 1.0
        # the last 4 are fine but the hour is not: still degraded, no re-arm
        (scores(4, 4, 4, 4, 0, 0, 0, 0, 0, 0, minutes_apart=5), DegradationState(active=True), Action.NONE,
         "already_alerted", WINDOW_MINUTES),
        # both windows back above the floor: re-arm
        (scores(4, 4, 4, 4, 3, 3, minutes_apart=5), DegradationState(active=True), Action.REARM, "recovered",
         WINDOW_ANSWERS),
        # fewer than 4 answers, and fewer than 5 in the hour: too early
        (scores(0, 0, 0, minutes_apart=5), DegradationState(), Action.NONE, "too_few_answers", None),
    ],
)  # fmt: skip
def test_either_window_below_the_floor_is_degradation(recent, state, action, reason, window):
    decision = decide_degradation(recent, window=DegradationWindow(4, 60, 5), floor=2.5, state=state, now=NOW)
    assert (decision.action, decision.reason, decision.window) == (action, reason, window)


def _rules_for(channel: str) -> ChannelRules:
    """What `channel` gets from a rules file with C_STRICT's own limits and one default, over the settings."""
    settings = Settings(_env_file=None, alert_cap_per_hour=10, degradation_floor=2.5)
    rules = ChannelRules.model_validate(
        {
            "defaults": {"degradation_window_minutes": 30},
            "channels": {
                "C_STRICT": {
                    "alert_cap_per_hour": 3,
                    "degradation_window": 50,
                    "degradation_window_minutes": 0,
                    "degradation_min_answers": 8,
                    "degradation_floor": 3.25,
                }
            },
        }
    )
    return rules.for_channel(channel, settings)


def test_a_channels_own_rule_sets_its_alert_limits():
    strict = _rules_for("C_STRICT")
    assert (strict.alert_cap_per_hour, strict.degradation_window, strict.degradation_window_minutes) == (3, 50, 0)
    assert (strict.degradation_min_answers, strict.degradation_floor) == (8, 3.25)


def test_a_channel_without_a_rule_takes_the_defaults():
    other = _rules_for("C_OTHER")
    assert (other.alert_cap_per_hour, other.degradation_window, other.degradation_window_minutes) == (10, 20, 30)
    assert (other.degradation_min_answers, other.degradation_floor) == (5, 2.5)


def test_a_degradation_floor_off_the_score_scale_is_refused():
    with pytest.raises(ValueError):
        ChannelRules.model_validate({"channels": {"C1": {"degradation_floor": 5}}})


@pytest.mark.parametrize(
    ("values", "state", "action", "reason"),
    [
        ([1, 1, 1], DegradationState(), Action.NONE, "too_few_answers"),
        ([1, 1, 1, 1], DegradationState(), Action.ALERT, "below_floor"),
        ([3, 3, 2, 2], DegradationState(), Action.NONE, "healthy"),  # mean 2.5 is not below 2.5
        ([3, 2, 2, 2], DegradationState(), Action.ALERT, "below_floor"),  # 2.25
        ([1, 1, 1, 1], DegradationState(active=True, last_alert_at=NOW - timedelta(hours=5)), Action.NONE,
         "already_alerted"),
        ([4, 4, 3, 3], DegradationState(active=True, last_alert_at=NOW - timedelta(hours=5)), Action.REARM,
         "recovered"),
        ([1, 1, 1, 1], DegradationState(active=False, last_alert_at=NOW - timedelta(minutes=20), episodes=1),
         Action.NONE, "once_per_period"),
        ([1, 1, 1, 1], DegradationState(active=False, last_alert_at=NOW - timedelta(minutes=61), episodes=1),
         Action.ALERT, "below_floor"),
    ],
)  # fmt: skip
def test_degradation_decision(values, state, action, reason):
    decision = decide_degradation(scores(*values), window=4, floor=2.5, state=state, now=NOW)
    assert (decision.action, decision.reason) == (action, reason)


def test_a_degradation_alert_waits_for_the_summary_once_the_alert_channel_had_its_cap():
    assert decide_degradation_delivery(0, 30) == Decision(Action.ALERT, "degradation")
    assert decide_degradation_delivery(29, 30).action is Action.ALERT
    assert decide_degradation_delivery(30, 30) == Decision(Action.HOLD, "alert_channel_cap")
    assert decide_degradation_delivery(500, None).action is Action.ALERT  # no cap set


def test_degradation_episode_numbers_follow_the_history():
    state = DegradationState(active=False, last_alert_at=NOW - timedelta(days=1), episodes=2)
    decision = decide_degradation(scores(0, 0, 0, 0), window=4, floor=2.5, state=state, now=NOW)
    assert decision.episode == 3
    assert decision.mean == 0 and decision.count == 4


def test_degradation_cycle_alert_rearm_alert():
    """Drop → alert; still low → quiet; recover → re-arm; drop again (later) → a new episode."""
    state = DegradationState()
    low, high = scores(1, 1, 1, 1), scores(4, 4, 4, 4)
    first = decide_degradation(low, window=4, floor=2.5, state=state, now=NOW)
    assert first.action is Action.ALERT and first.episode == 1
    state = DegradationState(active=True, last_alert_at=NOW, episodes=1)
    assert decide_degradation(low, window=4, floor=2.5, state=state, now=NOW).action is Action.NONE
    assert decide_degradation(high, window=4, floor=2.5, state=state, now=NOW).action is Action.REARM
    state = DegradationState(active=False, last_alert_at=NOW, episodes=1)
    later = NOW + timedelta(hours=2)
    again = decide_degradation(scores(1, 1, 1, 1, start=later), window=4, floor=2.5, state=state, now=later)
    assert again.action is Action.ALERT and again.episode == 2
