"""The alert plan as plain data in, decision out: every decision about one judgment (its low score, the channel's
degradation and how that is delivered), for the lock-free pre-check and the locked path alike."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from tests.alert_helpers import plan
from workers.alerts import policy
from workers.alerts.policy import (
    Action,
    Decision,
    DegradationState,
    DegradationWindow,
    JudgmentFacts,
    ScoredAt,
)

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


def test_an_ingested_exchange_moves_its_channels_mean_or_else_its_bots():
    in_no_channel = JudgmentFacts(1, "relevancy", "ok", 0, "ingest", None)
    bots = replace(PLAN_POLICY, key="bot:helpdesk")  # the rule resolved for its bot (store.bot_groups)
    assert policy.mean_key(in_no_channel, bots) == "bot:helpdesk"
    assert policy.mean_key(_relevancy(0, source="ingest"), bots) == "C_SUPPORT"  # it named a Slack channel
    assert policy.degradation_blocked(in_no_channel, bots) is None
    assert plan(in_no_channel, bots, degradation=_scores(0, 0, 0, 0), now=PLAN_NOW).degradation.action == "alert"
    assert policy.degradation_blocked(in_no_channel, PLAN_POLICY) == "not_applicable"  # no key: nothing to average
    for source in ("command", "import"):  # an on-demand check, an import: never live answers, no mean
        assert policy.degradation_blocked(_relevancy(0, source=source), PLAN_POLICY) == "not_applicable"
