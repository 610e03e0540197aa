"""The alert policy as plain data in, decision out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from common.privacy import may_quote_channel, may_quote_text
from store.rules import ChannelRules
from store.settings import Settings
from tests.alert_helpers import plan
from workers.alerts import policy
from workers.alerts.policy import (
    WINDOW_ANSWERS,
    WINDOW_MINUTES,
    Action,
    ChannelPolicy,
    Decision,
    DegradationState,
    DegradationWindow,
    HourCounts,
    JudgmentFacts,
    ScoredAt,
    capped,
    decide_degradation,
    decide_degradation_delivery,
    degradation_key,
    hour_label,
    is_low,
    low_intent,
    low_key,
    rolling_sample,
    summary_key,
    time_sample,
)

THRESHOLDS = {"relevancy": 2, "correctness": 0, "grounded": 2}
NOW = datetime(2026, 11, 27, 14, 30, tzinfo=UTC)


def decide_low_score(
    judgment: JudgmentFacts,
    thresholds: dict[str, float],
    *,
    alert_channel: str | None,
    alerts_this_hour: int,
    cap_per_hour: int,
    alert_channel_alerts_this_hour: int = 0,
    alert_channel_cap: int | None = None,
) -> Decision:
    """The low-score decision as the alert path makes it: the intent, then the hour's caps."""
    rule = ChannelPolicy(thresholds, alert_channel, cap_per_hour, alert_channel_cap, DegradationWindow(20), 2.5)
    return capped(low_intent(judgment, rule), rule, HourCounts(alerts_this_hour, alert_channel_alerts_this_hour))


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


@pytest.mark.parametrize(
    ("source_count", "alert_channel_count", "action", "reason"),
    [
        (0, 0, Action.ALERT, "low_score"),
        (0, 29, Action.ALERT, "low_score"),  # the 30th the alert channel receives this hour
        (0, 30, Action.HOLD, "alert_channel_cap"),  # a burst across many source channels stops here
        (3, 30, Action.HOLD, "alert_channel_cap"),
        (10, 5, Action.HOLD, "hourly_cap"),  # the source channel's own cap comes first
    ],
)
def test_the_alert_channel_has_a_cap_of_its_own(source_count, alert_channel_count, action, reason):
    decision = decide_low_score(
        facts(score=0),
        THRESHOLDS,
        alert_channel="C_ALERTS",
        alerts_this_hour=source_count,
        cap_per_hour=10,
        alert_channel_alerts_this_hour=alert_channel_count,
        alert_channel_cap=30,
    )
    assert (decision.action, decision.reason) == (action, reason)
    assert decision.action is not Action.NONE  # held or alerted, never dropped: held ones go to the summary


def test_per_channel_thresholds_change_the_decision():
    strict = {**THRESHOLDS, "relevancy": 3}
    assert is_low(facts(score=3), strict)
    assert not is_low(facts(score=3), THRESHOLDS)


def test_the_low_key_names_the_judgment():
    assert low_key(42) == "low:42"


def test_the_hour_label_is_the_utc_clock_hour():
    assert hour_label(NOW) == "2026112714"


def test_a_naive_datetime_is_read_as_utc():
    # SQLite hands back naive datetimes
    assert hour_label(NOW.replace(tzinfo=None)) == "2026112714"


def test_the_summary_key_names_the_channel_with_its_clock_hour():
    assert summary_key("C1", NOW) == "summary:C1:2026112714"
    assert summary_key("C1", NOW + timedelta(minutes=29)) == summary_key("C1", NOW)
    assert summary_key("C1", NOW + timedelta(minutes=31)) != summary_key("C1", NOW)


def test_the_degradation_key_names_the_channel_with_its_episode():
    assert degradation_key("C1", 3) == "degr:C1:3"


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
    assert (
        may_quote_text(private, rule_names_alert_channel=names_alert_channel, quote_private=quote_private) is expected
    )


@pytest.mark.parametrize(
    ("rules", "quoted"),
    [
        ({"channels": {"G1": {"alert_channel": "CA", "quote_private": True}}}, True),
        # quoting on in the defaults: enough once the channel's own entry names its alert channel
        ({"defaults": {"quote_private": True}, "channels": {"G1": {"alert_channel": "CA"}}}, True),
        # an alert channel from the defaults (or the environment) is never enough
        ({"defaults": {"quote_private": True, "alert_channel": "CA"}}, False),
        ({"channels": {"G1": {"quote_private": True}}}, False),
        ({"channels": {"G1": {"alert_channel": "CA"}}}, False),
        ({}, False),
    ],
)
def test_a_private_channel_is_quoted_only_under_its_own_alert_channel(rules: dict, quoted: bool) -> None:
    settings = Settings(_env_file=None, alert_channel="CDEFAULT")
    parsed = ChannelRules.model_validate(rules)
    assert may_quote_channel("G1", True, parsed, settings) is quoted
    assert may_quote_channel("G1", False, parsed, settings) is True  # public channels are always quoted


# plan: every decision about one judgment, for the lock-free pre-check and the locked path alike ------------------

PLAN_NOW = datetime(2026, 11, 27, 14, 30, tzinfo=UTC)
PLAN_POLICY = policy.ChannelPolicy(
    thresholds={"relevancy": 1.0},
    alert_channel="C_ALERTS",
    cap_per_hour=2,
    alert_channel_cap=3,
    window=DegradationWindow(4),
    floor=2.5,
)


def _relevancy(score: float | None, status: str = "ok", source: str = "capture") -> JudgmentFacts:
    return JudgmentFacts(1, "relevancy", status, score, source, "C_SUPPORT")


def _scores(*scores: float) -> policy.DegradationFacts:
    recent = [ScoredAt(score, PLAN_NOW - timedelta(minutes=i)) for i, score in enumerate(scores)]
    return policy.DegradationFacts(recent, DegradationState())


def test_the_plan_of_a_good_score_an_error_or_an_on_demand_verdict_changes_nothing():
    assert not plan(_relevancy(4), PLAN_POLICY, now=PLAN_NOW).changes_anything
    assert not plan(_relevancy(None, "error"), PLAN_POLICY, now=PLAN_NOW).changes_anything
    assert not plan(_relevancy(0, source="command"), PLAN_POLICY, now=PLAN_NOW).changes_anything


def test_the_plan_of_a_low_score_alerts_then_holds_over_a_cap():
    first = plan(_relevancy(0), PLAN_POLICY, now=PLAN_NOW)  # the pre-check: no counts
    assert first.low == Decision(Action.ALERT, "low_score") and first.changes_anything
    assert first.degradation.reason == "not_read"  # the pre-check reads the history only when the low score is fine
    source_cap = plan(_relevancy(0), PLAN_POLICY, counts=policy.HourCounts(source_channel=2), now=PLAN_NOW)
    assert source_cap.low == Decision(Action.HOLD, "hourly_cap")
    alert_cap = plan(_relevancy(0), PLAN_POLICY, counts=policy.HourCounts(1, 3), now=PLAN_NOW)
    assert alert_cap.low == Decision(Action.HOLD, "alert_channel_cap")
    claimed = plan(_relevancy(0), PLAN_POLICY, low_claimed=True, now=PLAN_NOW)  # a redelivery acts on the row
    assert claimed.low.action is Action.NONE and not claimed.changes_anything


_LOW_MEAN = _scores(2, 2, 2, 2)
_ALERTED_BEFORE = DegradationState(active=True, last_alert_at=PLAN_NOW - timedelta(hours=2), episodes=1)


def test_the_plan_of_a_low_mean_alerts_degradation():
    alerted = plan(_relevancy(2), PLAN_POLICY, degradation=_LOW_MEAN, now=PLAN_NOW)
    assert alerted.degradation.action is Action.ALERT and alerted.degradation.episode == 1
    assert alerted.degradation_delivery == Decision(Action.ALERT, "degradation") and alerted.changes_anything


def test_the_plan_of_a_healthy_mean_changes_nothing():
    healthy = plan(_relevancy(4), PLAN_POLICY, degradation=_scores(4, 4, 4, 4), now=PLAN_NOW)
    assert healthy.degradation.reason == "healthy" and not healthy.changes_anything


def test_the_plan_of_a_recovered_mean_rearms():
    healed = policy.DegradationFacts(_scores(4, 4, 4, 4).recent, _ALERTED_BEFORE)
    recovered = plan(_relevancy(4), PLAN_POLICY, degradation=healed, now=PLAN_NOW)
    assert recovered.degradation.action is Action.REARM and recovered.changes_anything


def test_the_plan_resumes_an_unposted_degradation_alert():
    unposted = policy.DegradationFacts(_LOW_MEAN.recent, _ALERTED_BEFORE, unposted=True)
    resumed = plan(_relevancy(2), PLAN_POLICY, degradation=unposted, now=PLAN_NOW)
    assert resumed.degradation.reason == "already_alerted" and resumed.post_unposted and resumed.changes_anything


def test_the_plan_of_too_few_answers_changes_nothing():
    too_early = plan(_relevancy(2), PLAN_POLICY, degradation=_scores(2, 2), now=PLAN_NOW)
    assert too_early.degradation.reason == "too_few_answers" and not too_early.changes_anything


def test_the_plan_counts_its_own_low_score_alert_against_the_alert_channels_cap():
    """A low score and a degradation alert planned together: the degradation is held when the low-score alert
    this same plan posts fills the alert channel's cap."""
    low_mean = _scores(0, 2, 2, 2)
    both = plan(_relevancy(0), PLAN_POLICY, counts=policy.HourCounts(1, 2), degradation=low_mean, now=PLAN_NOW)
    assert both.low.action is Action.ALERT
    assert both.degradation_delivery == Decision(Action.HOLD, "alert_channel_cap")
    held_low = plan(_relevancy(0), PLAN_POLICY, counts=policy.HourCounts(2, 2), degradation=low_mean, now=PLAN_NOW)
    assert held_low.low.action is Action.HOLD and held_low.degradation_delivery.action is Action.ALERT


@pytest.mark.parametrize(
    ("facts", "rule", "reason"),
    [
        (JudgmentFacts(1, "correctness", "ok", 0, "capture", "C"), PLAN_POLICY, "not_applicable"),
        (
            _relevancy(2),
            policy.ChannelPolicy({"relevancy": 1.0}, None, 2, 3, DegradationWindow(4), 2.5),
            "no_alert_channel",
        ),
    ],
)
def test_the_plan_names_why_degradation_does_not_apply(facts, rule, reason):
    assert policy.degradation_blocked(facts, rule) == reason
    assert plan(facts, rule, degradation=_scores(0, 0, 0, 0), now=PLAN_NOW).degradation.reason == reason
