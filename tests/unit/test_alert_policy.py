"""The alert policy as plain data in, decision out: a low score against its channel's thresholds and the hour's
caps, the keys and clock hours alerts are filed under, and which channels' texts an alert may quote."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from common.privacy import may_quote_channel, may_quote_text
from store.rules import ChannelRules
from store.settings import Settings
from workers.alerts.policy import (
    Action,
    ChannelPolicy,
    Decision,
    DegradationWindow,
    HourCounts,
    JudgmentFacts,
    capped,
    degradation_key,
    hour_label,
    is_low,
    low_intent,
    low_key,
    summary_key,
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
