"""The alert policy as plain data in, decision out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from workers.alerts.policy import (
    Action,
    DegradationState,
    JudgmentFacts,
    ScoredAt,
    decide_degradation,
    decide_low_score,
    degradation_key,
    hour_label,
    is_low,
    low_key,
    may_quote,
    rolling_sample,
    summary_key,
)

THRESHOLDS = {"relevancy": 2, "correctness": 0, "grounded": 2}
NOW = datetime(2026, 11, 27, 14, 30, tzinfo=UTC)


def facts(judge="relevancy", status="ok", score=1.0, source="capture") -> JudgmentFacts:
    return JudgmentFacts(judgment_id=7, judge=judge, status=status, score=score, source=source, channel_id="C1")


@pytest.mark.parametrize(
    ("judgment", "alert_channel", "alerts_this_hour", "action", "reason"),
    [
        (facts(score=0), "C_ALERTS", 0, Action.ALERT, "low_score"),
        (facts(score=2), "C_ALERTS", 0, Action.ALERT, "low_score"),  # at the threshold alerts
        (facts(score=3), "C_ALERTS", 0, Action.NONE, "above_threshold"),
        (facts(score=4), "C_ALERTS", 0, Action.NONE, "above_threshold"),
        (facts(judge="correctness", score=0), "C_ALERTS", 0, Action.ALERT, "low_score"),
        (facts(judge="correctness", score=1), "C_ALERTS", 0, Action.NONE, "above_threshold"),
        (facts(judge="grounded", score=2), "C_ALERTS", 0, Action.ALERT, "low_score"),
        (facts(judge="grounded", score=3), "C_ALERTS", 0, Action.NONE, "above_threshold"),
        (facts(status="error", score=None), "C_ALERTS", 0, Action.NONE, "status_error"),
        (facts(status="error", score=0), "C_ALERTS", 0, Action.NONE, "status_error"),
        (facts(judge="grounded", status="null", score=None), "C_ALERTS", 0, Action.NONE, "status_null"),
        (facts(status="ok", score=None), "C_ALERTS", 0, Action.NONE, "no_score"),
        (facts(judge="mystery", score=0), "C_ALERTS", 0, Action.NONE, "unknown_judge"),
        (facts(score=0), None, 0, Action.NONE, "no_alert_channel"),
        (facts(score=0, source="command"), "C_ALERTS", 0, Action.NONE, "on_demand"),
        (facts(score=0, source="shortcut"), "C_ALERTS", 0, Action.NONE, "on_demand"),
        (facts(score=0), "C_ALERTS", 9, Action.ALERT, "low_score"),  # the 10th of a cap of 10
        (facts(score=0), "C_ALERTS", 10, Action.HOLD, "hourly_cap"),
        (facts(score=0), "C_ALERTS", 25, Action.HOLD, "hourly_cap"),
        (facts(score=3), "C_ALERTS", 25, Action.NONE, "above_threshold"),  # over the cap, but not low
    ],
)
def test_low_score_decision(judgment, alert_channel, alerts_this_hour, action, reason):
    decision = decide_low_score(
        judgment, THRESHOLDS, alert_channel=alert_channel, alerts_this_hour=alerts_this_hour, cap_per_hour=10
    )
    assert (decision.action, decision.reason) == (action, reason)


def test_per_channel_thresholds_change_the_decision():
    strict = {**THRESHOLDS, "relevancy": 3}
    assert is_low(facts(score=3), strict)
    assert not is_low(facts(score=3), THRESHOLDS)


def test_keys_name_the_judgment_channel_and_hour():
    assert low_key(42) == "low:42"
    assert hour_label(NOW) == "2026112714"
    assert summary_key("C1", NOW) == "summary:C1:2026112714"
    assert summary_key("C1", NOW + timedelta(minutes=29)) == summary_key("C1", NOW)
    assert summary_key("C1", NOW + timedelta(minutes=31)) != summary_key("C1", NOW)
    assert degradation_key("C1", 3) == "degr:C1:3"
    # SQLite hands back naive datetimes: read as UTC
    assert hour_label(NOW.replace(tzinfo=None)) == "2026112714"


def scores(*values: float, minutes_apart: float = 10, start: datetime = NOW) -> list[ScoredAt]:
    """Newest first: values[0] is the latest."""
    return [ScoredAt(v, start - timedelta(minutes=minutes_apart * i)) for i, v in enumerate(values)]


def test_rolling_sample_is_the_last_answers_however_old():
    quiet = scores(1, 1, 4, 4, 4, minutes_apart=60 * 24)
    assert rolling_sample(list(reversed(quiet)), window=3) == [1, 1, 4]  # newest first, order of input irrelevant
    busy = scores(*([1.0] * 30), minutes_apart=1)
    assert rolling_sample(busy, window=20) == [1.0] * 20


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


@pytest.mark.parametrize(
    ("private", "names_alert_channel", "quote_private", "expected"),
    [
        (False, False, False, True),
        (False, True, True, True),
        (True, False, False, False),
        (True, True, False, False),
        (True, False, True, False),  # quote_private without naming the alert channel is not enough
        (True, True, True, True),
    ],
)
def test_private_channels_are_quoted_only_where_their_rule_allows(
    private, names_alert_channel, quote_private, expected
):
    assert may_quote(private, rule_names_alert_channel=names_alert_channel, quote_private=quote_private) is expected
