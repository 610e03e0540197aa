"""The confirmation rule: a low first verdict alerts only when the second opinion is low too."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tests.alert_helpers import plan
from workers.alerts.policy import (
    Action,
    ChannelPolicy,
    DegradationWindow,
    JudgmentFacts,
    confirmation_outcome,
)

NOW = datetime(2026, 12, 3, 10, tzinfo=UTC)
POLICY = ChannelPolicy({"relevancy": 2}, "C_ALERTS", 10, 30, DegradationWindow(20), 2.5)


@pytest.mark.parametrize(
    ("status", "score", "threshold", "outcome"),
    [
        ("ok", 0, 2, "confirmed"),
        ("ok", 2, 2, "confirmed"),  # at the threshold is low
        ("ok", 3, 2, "disputed"),
        ("null", None, 2, "unconfirmed"),
        ("error", None, 2, "unconfirmed"),
        ("ok", 1, None, "unconfirmed"),
    ],
)
def test_second_opinion_outcome(status, score, threshold, outcome):
    assert confirmation_outcome(status, score, threshold) == outcome


@pytest.mark.parametrize(
    ("confirmation", "action", "reason"),
    [
        (None, Action.ALERT, "low_score"),  # off, or the lock-free pre-check before the second opinion
        ("confirmed", Action.ALERT, "low_score"),
        ("disputed", Action.NONE, "disputed"),
        ("unconfirmed", Action.NONE, "unconfirmed"),
    ],
)
def test_the_plan_decides_on_the_confirmed_facts(confirmation, action, reason):
    facts = JudgmentFacts(1, "relevancy", "ok", 1, "capture", "C_SUPPORT", confirmation)
    decided = plan(facts, POLICY, now=NOW)
    assert (decided.low.action, decided.low.reason) == (action, reason)


def test_a_high_score_is_never_gated():
    facts = JudgmentFacts(1, "relevancy", "ok", 4, "capture", "C_SUPPORT", "disputed")
    assert plan(facts, POLICY, now=NOW).low.reason == "above_threshold"
