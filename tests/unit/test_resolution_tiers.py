"""Resolution tiers (capture.resolution): each tier's edges, the window's, the bot's signals as the ingest API turns
them into outcome signals, re-asks told from new questions by the real rules, and the tallies' intervals against
statsmodels."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from statsmodels.stats.proportion import proportion_confint

from capture.outcomes import asker_signals, closing_signals
from capture.resolution import (
    ABANDONED,
    ASSUMED,
    CONFIRMED,
    ENDED_UNRESOLVED,
    ESCALATED,
    NEGATIVE,
    OPEN,
    REASKED,
    RESOLVED_ALONE,
    TEAMMATE,
    UNRESOLVED,
    AnswerSignals,
    Resolution,
    judged_failed,
    resolution_of,
)
from common.exchange_signals import Feedback, Handoff
from common.exchange_signals import Resolution as BotResolution
from common.messages.resolution import tiers_text, window_text
from common.reports.intervals import MIN_N
from common.reports.resolution import KeyedTallies, ResolutionTally
from store.settings import Settings
from store.signals import (
    ESCALATION,
    HUMAN_TAKEOVER,
    NEGATIVE_REACTION,
    POSITIVE_REACTION,
    REASK,
    RESOLVED,
    THANKED,
)
from store.stats_queries import JudgmentRow
from workers.bot_signals import effect_of

ANSWERED = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=30)
AFTER = ANSWERED + WINDOW + timedelta(seconds=1)  # the window is over
PHRASES = Settings(_env_file=None).escalation_phrases


def tier(*signals: str, judged: bool | None = None, ended: bool | None = None, now: datetime = AFTER) -> Resolution:
    return resolution_of(AnswerSignals(ANSWERED, tuple(signals), judged_failed=judged, ended=ended), now, WINDOW)


# The window -----------------------------------------------------------------------------------------------------


def test_an_answer_is_open_up_to_its_windows_last_second_then_counted() -> None:
    assert tier(now=ANSWERED).tier == OPEN
    assert tier(REASK, now=ANSWERED + WINDOW).tier == OPEN  # its last second: still open
    assert tier(REASK, now=ANSWERED + WINDOW + timedelta(microseconds=1)) == Resolution(UNRESOLVED, REASKED)
    assert tier(now=ANSWERED + WINDOW + timedelta(microseconds=1)) == Resolution(RESOLVED_ALONE, ASSUMED)


def test_the_stores_word_on_the_window_wins_over_the_clock() -> None:
    # Still watched: its own end (set when it opened, under an earlier window) is not over, whatever today's is.
    assert tier(ended=False, now=ANSWERED + timedelta(days=2)).tier == OPEN
    # Closed early: the bot's side said how the conversation ended.
    assert tier(RESOLVED, ended=True, now=ANSWERED + timedelta(minutes=1)) == Resolution(RESOLVED_ALONE, ASSUMED)


def test_a_signal_after_the_window_is_ignored_one_at_its_end_counts() -> None:
    edge = AnswerSignals(ANSWERED, (REASK,), after_seconds={REASK: WINDOW.total_seconds()})
    late = AnswerSignals(ANSWERED, (REASK,), after_seconds={REASK: WINDOW.total_seconds() + 1})
    assert resolution_of(edge, AFTER, WINDOW).tier == UNRESOLVED
    assert resolution_of(late, AFTER, WINDOW) == Resolution(RESOLVED_ALONE, ASSUMED)


# Each tier ------------------------------------------------------------------------------------------------------


def test_resolved_without_help_is_confirmed_or_assumed() -> None:
    assert tier(RESOLVED) == Resolution(RESOLVED_ALONE, ASSUMED)
    assert tier(THANKED, RESOLVED) == Resolution(RESOLVED_ALONE, CONFIRMED)
    assert tier(POSITIVE_REACTION, RESOLVED, ended=True) == Resolution(RESOLVED_ALONE, CONFIRMED)


def test_a_teammates_reply_then_resolved_is_resolved_by_a_teammate() -> None:
    assert tier(HUMAN_TAKEOVER).tier == TEAMMATE
    assert tier(HUMAN_TAKEOVER, RESOLVED, ended=True).tier == TEAMMATE  # the bot said resolved after the reply
    assert tier(HUMAN_TAKEOVER, THANKED).tier == TEAMMATE  # the thanks went to the teammate
    assert tier(REASK, HUMAN_TAKEOVER).tier == TEAMMATE  # re-asked, then a teammate answered


def test_an_escalation_wins_over_everything_after_it() -> None:
    assert tier(ESCALATION).tier == ESCALATED
    assert tier(ESCALATION, HUMAN_TAKEOVER, THANKED).tier == ESCALATED
    assert tier(REASK, ESCALATION).tier == ESCALATED


def test_unresolved_says_how() -> None:
    assert tier(REASK) == Resolution(UNRESOLVED, REASKED)
    assert tier(NEGATIVE_REACTION) == Resolution(UNRESOLVED, NEGATIVE)
    assert tier(REASK, THANKED) == Resolution(UNRESOLVED, REASKED)  # "thanks, but how do I ...": asked again


def test_silence_after_a_failed_answer_is_abandoned_not_resolved() -> None:
    assert tier(RESOLVED, judged=True) == Resolution(UNRESOLVED, ABANDONED)
    assert tier(judged=True) == Resolution(UNRESOLVED, ABANDONED)
    # The asker's word beats the judge's: thanked or 👍, it helped.
    assert tier(THANKED, RESOLVED, judged=True) == Resolution(RESOLVED_ALONE, CONFIRMED)
    assert tier(POSITIVE_REACTION, RESOLVED, judged=True) == Resolution(RESOLVED_ALONE, CONFIRMED)
    # Not judged, or judged well: silence is an assumed resolution (as Fin's).
    assert tier(RESOLVED, judged=None) == tier(RESOLVED, judged=False) == Resolution(RESOLVED_ALONE, ASSUMED)


def test_the_judges_failure_needs_a_low_score_its_second_opinion_kept() -> None:
    def verdict(score, status="ok", confirmation=None, judge="relevancy"):
        return JudgmentRow(id=1, judge=judge, status=status, score=score, max_score=4, confirmation_status=confirmation)

    thresholds = {"relevancy": 2}
    assert judged_failed([verdict(2)], thresholds) is True  # at the threshold: low
    assert judged_failed([verdict(3)], thresholds) is False
    assert judged_failed([verdict(1, confirmation="confirmed")], thresholds) is True
    assert judged_failed([verdict(1, confirmation="disputed")], thresholds) is False
    assert judged_failed([verdict(1, confirmation="unconfirmed")], thresholds) is False
    assert judged_failed([verdict(None, status="error")], thresholds) is None
    assert judged_failed([verdict(0, judge="grounded")], thresholds) is None  # no threshold for it: no say


# The bot's signals (POST /v1/exchanges/{id}/signals) as the ingest API records them ---------------------------


def bot_tier(*signals, ended: bool | None = None) -> str:
    names: list[str] = []
    ends = False
    for signal in signals:
        effect = effect_of(signal)
        names += sorted(effect.names)
        ends = ends or effect.ends
    return tier(*names, ended=True if ends else ended).tier


def test_the_bots_handoff_is_an_escalation_with_or_without_the_persons_reply() -> None:
    assert bot_tier(Handoff(type="handoff", bot="helpdesk")) == ESCALATED
    assert bot_tier(Handoff(type="handoff", bot="helpdesk", reply="Refunded, sorry.")) == ESCALATED
    resolved = BotResolution(type="resolution", bot="helpdesk", value="resolved")
    assert bot_tier(Handoff(type="handoff", bot="helpdesk"), resolved) == ESCALATED


def test_the_bots_resolution_and_thumbs() -> None:
    assert bot_tier(BotResolution(type="resolution", bot="helpdesk", value="resolved")) == RESOLVED_ALONE
    unresolved = tier(
        *effect_of(BotResolution(type="resolution", bot="helpdesk", value="unresolved")).names, ended=True
    )
    assert unresolved == Resolution(UNRESOLVED, ENDED_UNRESOLVED)
    assert bot_tier(Feedback(type="feedback", bot="helpdesk", value="negative")) == UNRESOLVED
    thumbs_up = [*effect_of(Feedback(type="feedback", bot="helpdesk", value="positive")).names]
    assert tier(*thumbs_up, *closing_signals(thumbs_up), ended=True) == Resolution(RESOLVED_ALONE, CONFIRMED)


# Re-asks, told from new questions by the channel's rules -------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("How do I reset my password? It still won't let me in", Resolution(UNRESOLVED, REASKED)),
        ("Thanks! How do I export my invoices?", Resolution(RESOLVED_ALONE, CONFIRMED)),  # a new question
        ("Thanks, that worked", Resolution(RESOLVED_ALONE, CONFIRMED)),
        ("That didn't help, can I talk to a human?", Resolution(ESCALATED)),
    ],
)
def test_re_ask_detection_from_the_askers_reply(reply: str, expected: Resolution) -> None:
    topic = "How do I reset my password? Go to Settings, then Security, and press Reset password."
    signals = asker_signals(reply, topic, phrases=PHRASES)
    closing = closing_signals(signals)
    assert tier(*sorted(signals), *closing, ended=True) == expected


# Tallies and their intervals -----------------------------------------------------------------------------------


def tally_of(counts: dict[Resolution, int], open_: int = 0) -> ResolutionTally:
    tally = ResolutionTally()
    for found, count in counts.items():
        for _ in range(count):
            tally.add(found)
    for _ in range(open_):
        tally.add(Resolution(OPEN))
    tally.add(None)  # never watched: nothing
    return tally


def test_tallies_leave_open_answers_out_and_match_statsmodels_wilson() -> None:
    stats = tally_of(
        {
            Resolution(RESOLVED_ALONE, ASSUMED): 9,
            Resolution(RESOLVED_ALONE, CONFIRMED): 3,
            Resolution(TEAMMATE): 8,
            Resolution(ESCALATED): 4,
            Resolution(UNRESOLVED, REASKED): 3,
            Resolution(UNRESOLVED, ABANDONED): 1,
        },
        open_=5,
    ).stats("C1")
    assert (stats.n, stats.open) == (28, 5)
    for tier_name, count in (("resolved", 12), ("teammate", 8), ("escalated", 4), ("unresolved", 4)):
        low, high = proportion_confint(count, 28, alpha=0.05, method="wilson")
        found = stats.estimate(tier_name)
        assert found.value == count / 28 and found.n == 28
        assert (found.low, found.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    # Reference values, to the figure a person reads: 12/28 is 43% (27–61%).
    assert tiers_text(stats).startswith("resolved without help 43% (27–61%, n=28) · resolved by a teammate 29% (15–47%")
    assert "unresolved 14% (6–31%, n=28): re-asked 3, abandoned 1 · 5 still in their window" in tiers_text(stats)
    as_json = stats.as_json()
    assert as_json["tiers"]["resolved"]["count"] == 12 and as_json["reasons"] == {
        "assumed": 9,
        "confirmed": 3,
        "reasked": 3,
        "abandoned": 1,
    }
    assert as_json["tiers"]["resolved"]["low"] == pytest.approx(proportion_confint(12, 28, method="wilson")[0])


def test_below_the_minimum_the_tiers_are_too_few() -> None:
    stats = tally_of({Resolution(RESOLVED_ALONE, ASSUMED): 2, Resolution(ESCALATED): MIN_N - 3}).stats()
    assert stats.n == MIN_N - 1
    assert tiers_text(stats) == f"too few (n={MIN_N - 1}): 2 resolved without help, {MIN_N - 3} escalated"
    assert tiers_text(tally_of({}, open_=2).stats()) == "no resolution yet (2 still in their window)"
    assert tiers_text(tally_of({}).stats()) == ""


def test_keyed_tallies_count_each_bot_apart() -> None:
    keyed = KeyedTallies()
    for bot, found in [
        ("helpdesk", Resolution(ESCALATED)),
        ("billing", Resolution(TEAMMATE)),
        (None, Resolution(ESCALATED)),
    ]:
        keyed.add(bot, found)
    stats = keyed.stats()
    assert list(stats) == ["billing", "helpdesk"]
    assert stats["helpdesk"].count(ESCALATED) == 1 and stats["billing"].count(TEAMMATE) == 1


def test_the_window_as_read() -> None:
    assert (window_text(1800), window_text(86400), window_text(0), window_text(90)) == (
        "30-min window",
        "24-h window",
        "window off",
        "2-min window",
    )


# Per topic --------------------------------------------------------------------------------------------------------


def test_a_topics_questions_are_counted_per_tier_and_shown_with_intervals() -> None:
    from common.messages.topics import figures_text
    from common.reports.topics import TopicLine
    from topics.figures import figures_of
    from topics.questions import Question

    tiers = [RESOLVED_ALONE] * 4 + [TEAMMATE] * 2 + [ESCALATED] * 1 + [UNRESOLVED] * 5 + [OPEN] * 3 + [None] * 2
    questions = [Question(i, "C1", None, "q", ANSWERED, tier=found) for i, found in enumerate(tiers)]
    figures = figures_of(questions)
    assert figures.tiers == {RESOLVED_ALONE: 4, TEAMMATE: 2, ESCALATED: 1, UNRESOLVED: 5}  # open and unwatched apart
    assert figures.as_dict()["tiers"] == figures.tiers
    text = figures_text(TopicLine("Refunds", figures, None, None))
    low, high = proportion_confint(5, 12, method="wilson")
    assert f"unresolved 42% ({low * 100:.0f}–{high * 100:.0f}%, n=12)" in text
    assert "resolved without help 33% (14–61%, n=12) · resolved by a teammate 17% (5–45%, n=12)" in text
    # A run stored before the tiers keeps its single resolved share.
    from topics.figures import Figures

    assert "50% resolved (25–75%, n=12)" in figures_text(TopicLine("Old", Figures(12, 0, 6, 12), None, None))


def test_a_topics_question_gets_its_tier_from_its_row() -> None:
    from store.stats_queries import PairRow
    from store.topics import QuestionText
    from topics.service import question_of

    def row(signals, closed, score):
        judgment = JudgmentRow(id=1, judge="relevancy", status="ok", score=score, max_score=4)
        return PairRow(
            id=1, channel_id="C1", created_at=ANSWERED, status="judged", signals=signals, window_closed=closed,
            judgments=(judgment,),
        )  # fmt: skip

    text = QuestionText("How do I get a refund?", "1.0", None)
    thresholds = {"relevancy": 2}

    def tier_of(signals, closed, score):
        return question_of(row(signals, closed, score), text, thresholds, now=AFTER, window=WINDOW).tier

    assert tier_of(("resolved",), True, 4) == RESOLVED_ALONE
    assert tier_of(("resolved",), True, 1) == UNRESOLVED  # abandoned after a failed answer
    assert tier_of(("human_takeover",), True, 1) == TEAMMATE
    assert tier_of((), False, 4) == OPEN
    assert tier_of((), None, 4) is None
