"""The missed-failure decision and the alerts' outcome lines (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from common.messages.alerts import LowScoreAlert, low_score_alert
from common.messages.missed_failure import missed_failure_alert
from workers.alerts.outcomes import decide_missed
from workers.alerts.policy import Action, ChannelPolicy, DegradationWindow, HourCounts, JudgmentFacts

POLICY = ChannelPolicy(
    thresholds={"relevancy": 2, "correctness": 2},
    alert_channel="C_ALERTS",
    cap_per_hour=2,
    alert_channel_cap=None,
    window=DegradationWindow(20, 0, 0),
    floor=0.5,
)
GOOD = JudgmentFacts(1, "relevancy", "ok", 4, channel_id="C")
LOW = JudgmentFacts(2, "correctness", "ok", 1, channel_id="C")


def test_a_missed_failure_needs_a_confirmed_failure() -> None:
    assert decide_missed({"reask"}, [GOOD], POLICY).reason == "not_failed"


def test_a_missed_failure_needs_a_good_score() -> None:
    assert decide_missed({"reask", "negative_reaction"}, [LOW], POLICY).reason == "not_scored_well"
    error = JudgmentFacts(3, "relevancy", "error", None)
    assert decide_missed({"reask", "escalation"}, [error], POLICY).reason == "not_scored_well"


def test_a_confirmed_failure_after_a_good_score_alerts_on_the_good_judgment() -> None:
    decided = decide_missed({"reask", "human_takeover"}, [LOW, GOOD], POLICY)
    assert (decided.action, decided.judgment_id, decided.disagreed) == (Action.ALERT, 1, (1,))


def test_a_missed_failure_respects_the_caps() -> None:
    failed = {"reask", "escalation"}
    assert decide_missed(failed, [GOOD], POLICY, HourCounts(2, 0)).action is Action.HOLD
    capped = ChannelPolicy(**{**POLICY.__dict__, "alert_channel_cap": 1})
    assert decide_missed(failed, [GOOD], capped, HourCounts(0, 1)).reason == "alert_channel_cap"


def test_a_missed_failure_without_an_alert_channel_alerts_nobody() -> None:
    failed = {"reask", "escalation"}
    silent = ChannelPolicy(**{**POLICY.__dict__, "alert_channel": None})
    decided = decide_missed(failed, [GOOD], silent)
    assert decided.action is Action.NONE and decided.disagreed == (1,)  # still a disagreement


def alert(**overrides) -> LowScoreAlert:
    values = dict(
        judgment_id=7,
        judge="relevancy",
        score=4,
        max_score=4,
        threshold=2,
        channel_id="C",
        answered_at=datetime(2026, 3, 2, 9, tzinfo=UTC),
        quote=False,
    )
    return LowScoreAlert(**{**values, **overrides})


def test_alerts_show_the_signals_so_far() -> None:
    plain = low_score_alert(alert())
    assert "After the answer" not in str(plain["blocks"])
    shown = low_score_alert(alert(signals=("asked again 2 min later", "a teammate replied 5 min later")))
    assert "*After the answer:* asked again 2 min later · a teammate replied 5 min later" in str(shown["blocks"])


def test_the_missed_failure_alert_withholds_a_private_conversation() -> None:
    rendered = missed_failure_alert(alert(signals=("asked again 1 min later",), question="secret question"))
    assert rendered["blocks"][0]["text"]["text"] == "Missed failure: relevancy 4 / 4"
    assert "secret question" not in str(rendered) and "Missed failure in <#C>" in rendered["text"]
    assert len(rendered["blocks"]) <= 50
