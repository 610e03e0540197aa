"""Resolution tiers end to end (SQLite and PostgreSQL, the fake Slack over HTTP, signed requests): a week of answers
whose tiers are known, stored as capture and the ingest API store them, and what the weekly digest posted and
`/judge stats` answered say of them: each tier's count, share and Wilson interval, open answers apart, per bot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from common.messages.verdicts import stats_message
from store.exchange_models import Exchange
from store.models import Judgment, OutcomeSignal, OutcomeWindow, Pair
from tests import command_helpers
from tests.bot_harness import BotServer
from tests.command_helpers import C, command
from tests.processes import wait_for
from workers.tasks.digest import send_digest

slack = command_helpers.slack  # the served bot's fake Slack: C_SUPPORT, where U_ASKER is a member
DIGEST_CHANNEL = "C_ALERTS"
_ts = iter(range(1, 1_000_000))

# (signals, relevancy score, how many): 20 closed answers in C_SUPPORT whose tiers are known.
WEEK = [
    (["resolved"], 4, 5),  # resolved without help, assumed
    (["thanked", "resolved"], 3, 3),  # resolved without help, confirmed
    (["reask", "human_takeover"], 1, 4),  # a teammate stepped in
    (["escalation", "human_takeover"], 1, 3),  # the bot's handoff with the person's reply: escalated
    (["reask", "negative_reaction"], 4, 3),  # re-asked: unresolved, though the judge scored it well
    (["resolved"], 1, 2),  # nobody said a word after a failed answer: abandoned, unresolved
]
# The shares as a person reads them (Wilson, statsmodels' proportion_confint: 8/20 0.219–0.613, 4/20 0.081–0.416,
# 3/20 0.052–0.360, 5/20 0.112–0.469).
TIERS_TEXT = (
    "resolved without help 40% (22–61%, n=20) · resolved by a teammate 20% (8–42%, n=20) · escalated 15% (5–36%, "
    "n=20) · unresolved 25% (11–47%, n=20): re-asked 3, abandoned 2 · 2 still in their window"
)


def add_answer(session, at: datetime, signals: list[str], score: int, *, closed: bool = True, bot=None) -> int:
    pair = Pair(
        channel_id=None if bot else C,
        source="ingest" if bot else "capture",
        answer_ts=f"{at.timestamp():.0f}.{next(_ts):06d}",
        question_ts=f"{at.timestamp() - 5:.6f}",
        answer_bot_id=None if bot else "B_SUPPORT",
        status="judged",
        question_text="How do I reset my password?",
        answer_text="Settings, Security, Reset password.",
        created_at=at,
    )
    session.add(pair)
    session.flush()
    session.add(Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=score, max_score=4, created_at=at))
    if bot:
        session.add(
            Exchange(
                client_id=f"x{pair.id}",
                bot=bot,
                conversation_id=f"conv{pair.id}",
                turn=1,
                visibility="dm",
                asked_at=at,
                answered_at=at,
                pair_id=pair.id,
            )
        )
    session.add(
        OutcomeWindow(
            pair_id=pair.id,
            channel_id=pair.channel_id or "",
            answer_ts=pair.answer_ts,
            thread_key=pair.answer_ts,
            asker="U_ASKER",
            closes_at=at + timedelta(minutes=30),
            closed_at=at + timedelta(minutes=30) if closed else None,
        )
    )
    session.add_all(OutcomeSignal(pair_id=pair.id, name=name, after_seconds=60.0) for name in signals)
    return pair.id


def seed_week(runtime, now: datetime) -> None:
    """WEEK in C_SUPPORT over the last days, 2 answers still in their window, and 2 of another bot's answers sent to
    the ingest API outside Slack (one escalated by its handoff, one resolved)."""
    start = now - timedelta(days=5)
    with runtime.db.session() as session:
        minutes = 0
        for signals, score, count in WEEK:
            for _ in range(count):
                add_answer(session, start + timedelta(minutes=minutes * 37), signals, score)
                minutes += 1
        for back in (5, 10):
            add_answer(session, now - timedelta(minutes=back), ["reask"], 0, closed=False)
        add_answer(session, start, ["escalation"], 3, bot="helpdesk")
        add_answer(session, start, ["resolved"], 4, bot="helpdesk")


@pytest.fixture
def bot(settings_for, slack, runtime_for):
    settings = settings_for(slack_api_url=slack.api_url, digest_channel_setting=DIGEST_CHANNEL)
    runtime_for(settings)  # the process runtime the digest task reads
    server = BotServer(settings)
    yield server.__enter__()
    server.__exit__()


def test_the_digest_shows_each_tiers_count_share_and_interval(bot, slack) -> None:
    seed_week(bot.runtime, datetime.now(UTC))
    assert send_digest.apply().get() == "sent"
    (posted,) = slack.posted(DIGEST_CHANNEL)
    text = str(posted["blocks"])
    overall = next(f["text"] for b in posted["blocks"] for f in b.get("fields", ()) if f["text"].startswith("*Out"))
    # Every channel and bot together: C_SUPPORT's 20 and the helpdesk bot's 2.
    assert "resolution (30-min window): resolved without help 41% (23–61%, n=22)" in overall
    assert "escalated 18% (7–39%, n=22)" in overall
    # Each bot apart: the Slack bot's answers and the ingested ones.
    assert f"bot B_SUPPORT: {TIERS_TEXT}" in overall
    assert "bot helpdesk: too few (n=2): 1 resolved without help, 1 escalated" in overall
    # The channel's own section.
    assert f"outcomes: resolution (30-min window): {TIERS_TEXT}" in text


def test_judge_stats_show_each_tiers_count_share_and_interval(bot, slack) -> None:
    seed_week(bot.runtime, datetime.now(UTC))
    command(bot, f"stats <#{C}|support>", slack, key="stats")
    [answer] = wait_for(lambda: slack.responses["stats"], timeout=10, what="stats")
    text = answer["blocks"][-1]["text"]["text"]
    assert f"*Resolution* (30-min window): {TIERS_TEXT}" in text
    assert "resolved without help: 3 confirmed, 5 assumed" in text
    assert "22 answers judged" in text  # the judge's figures are still there (2 of them still in their window)


def test_judge_stats_of_a_bots_conversations_show_its_tiers(bot, slack) -> None:
    seed_week(bot.runtime, datetime.now(UTC))
    command(bot, "stats bot:helpdesk", slack, key="bot")
    [answer] = wait_for(lambda: slack.responses["bot"], timeout=10, what="stats")
    text = answer["blocks"][-1]["text"]["text"]
    assert "*Resolution* (30-min window): too few (n=2): 1 resolved without help, 1 escalated" in text


def test_stats_without_answers_say_so() -> None:
    assert stats_message(C, [])["text"].startswith("No answers judged")
