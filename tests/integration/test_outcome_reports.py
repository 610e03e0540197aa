"""Outcome figures read from a real database (SQLite and PostgreSQL): the digest posted to the fake Slack, its
dry run's text and an App Home publish show the rates, reactions, scores against outcomes and teammate-referenced
correctness, against last week, counting only closed windows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from bot.listeners.home import publish_home
from common.membership import MembershipCache
from common.reports.period import period_for
from common.runtime import Runtime, slack_client_for
from store.models import Judgment, OutcomeSignal, OutcomeWindow, Pair
from store.stats_queries import stream_pair_rows
from tests import digest_helpers
from tests.fakes.slack_server import FakeSlack
from tests.sql_capture import statements_run
from workers.tasks.digest import send_digest

DIGEST_CHANNEL = "CDIGEST"

# The empty fake Slack of tests/digest_helpers.py, bound here for pytest to find (over the integration conftest's
# `slack`).
slack = digest_helpers.slack


@pytest.fixture
def runtime(settings_for, slack: FakeSlack, tmp_path: Path, runtime_for) -> Runtime:
    slack.add_channel("C1", "support")
    slack.add_channel("C2", "help")
    settings = settings_for(  # on the test's Redis: App Home's membership cache
        slack_api_url=slack.api_url,
        digest_channel_setting=DIGEST_CHANNEL,
        alert_channel="CALERTS",
        data_dir=tmp_path / "data",
    )
    return runtime_for(settings)


def add_answer(
    session,
    channel: str,
    at: datetime,
    signals: list[str],
    *,
    score: int,
    closed: bool = True,
    correctness: int | None = None,
    reference: str | None = None,
) -> None:
    pair = Pair(
        channel_id=channel,
        answer_ts=f"{at.timestamp():.6f}",
        status="judged",
        question_text="q",
        answer_text="a",
        reference_text=reference,
        created_at=at,
    )
    session.add(pair)
    session.flush()
    session.add(Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=score, max_score=4))
    if correctness is not None:
        session.add(Judgment(pair_id=pair.id, judge="correctness", status="ok", score=correctness, max_score=2))
    session.add(
        OutcomeWindow(
            pair_id=pair.id,
            channel_id=channel,
            answer_ts=pair.answer_ts,
            thread_key=pair.answer_ts,
            asker="UASKER",
            closes_at=at + timedelta(minutes=30),
            closed_at=at + timedelta(minutes=30) if closed else None,
        )
    )
    session.add_all(OutcomeSignal(pair_id=pair.id, name=name) for name in signals)


def seed(runtime: Runtime, now: datetime, times: int = 1) -> None:
    """C1 this week: 2 of 4 closed windows resolved, a failed well-scored answer, a teammate's reference judged at
    the top score; an open window not counted. Last week: 1 of 2 resolved. C2: 1 of 1 resolved, none last week.
    `times`: all of it that many times over, an hour apart (enough answers for rates)."""
    for time in range(times):
        day = now - timedelta(days=1) + timedelta(hours=time)
        with runtime.db.session() as session:
            add_answer(session, "C1", day, ["resolved", "positive_reaction"], score=4)
            add_answer(session, "C1", day + timedelta(minutes=1), ["thanked", "resolved"], score=3)
            add_answer(session, "C1", day + timedelta(minutes=2), ["reask", "negative_reaction"], score=4)
            add_answer(
                session, "C1", day + timedelta(minutes=3), ["reask", "human_takeover"], score=0, correctness=2,
                reference="the teammate's answer",
            )  # fmt: skip
            add_answer(session, "C1", day + timedelta(minutes=4), ["reask", "negative_reaction"], score=0, closed=False)
            add_answer(session, "C2", day + timedelta(minutes=5), ["resolved"], score=2)
            week_ago = now - timedelta(days=8) + timedelta(hours=time)
            add_answer(session, "C1", week_ago, ["resolved"], score=3)
            add_answer(session, "C1", week_ago + timedelta(minutes=1), ["escalation"], score=1)


def stream_both_weeks(runtime: Runtime) -> tuple[list, list, list[str]]:
    """The seeded rows of this week and last week, with the SQL statements their streaming ran."""
    now = datetime.now(UTC)
    seed(runtime, now)
    period = period_for(now)
    with statements_run(runtime.db.engine) as queries, runtime.db.session() as session:
        current = list(stream_pair_rows(session, period.start, period.end))
        previous = list(stream_pair_rows(session, period.previous_start, period.start))
    return current, previous, queries


def test_signals_are_read_in_one_query_per_week(runtime: Runtime) -> None:
    _, previous, queries = stream_both_weeks(runtime)
    assert len([q for q in queries if "outcome_signals" in q]) == 2  # one per week's rows, not one per pair
    assert len(previous) == 2


def test_rows_carry_their_outcome_signals(runtime: Runtime) -> None:
    current, _, _ = stream_both_weeks(runtime)
    (teammate,) = [row for row in current if row.has_reference]
    assert teammate.signals == ("reask", "human_takeover")
    with runtime.db.session() as session:
        assert session.execute(select(func.count()).select_from(OutcomeSignal)).scalar_one() == 13


def test_rows_carry_whether_their_window_has_closed(runtime: Runtime) -> None:
    current, _, _ = stream_both_weeks(runtime)
    (teammate,) = [row for row in current if row.has_reference]
    assert teammate.window_closed is True
    assert sorted(row.window_closed for row in current) == [False, True, True, True, True, True]


def test_digest_shows_the_outcome_figures(runtime: Runtime, slack: FakeSlack) -> None:
    seed(runtime, datetime.now(UTC), times=5)
    assert send_digest.apply().get() == "sent"
    (posted,) = slack.posted(DIGEST_CHANNEL)
    blocks = posted["blocks"]
    # The figures' block, wherever the digest places it (what to fix first and the golden line may come before).
    overall = next(f["text"] for b in blocks for f in b.get("fields", ()) if f["text"].startswith("*Outcomes*"))
    # The tiers: C1's 2 resolved of 4 closed (thanked or 👍), 1 re-asked, 1 a teammate's; C2's one scored at its
    # threshold with no word after it: abandoned. Last week: 1 resolved, 1 escalated. Five times over.
    assert overall.startswith(
        "*Outcomes*\nresolution (30-min window): resolved without help 40% (23–59%, n=25), no clear change (n=25 vs "
        "10) · resolved by a teammate 20% (9–39%, n=25), no clear change (n=25 vs 10) · escalated 0% (0–13%, n=25), "
        "▼ 50% → 0% (significant) · unresolved 40% (23–59%, n=25), ▲ 0% → 40% (significant): re-asked 5, "
        "abandoned 5 · 5 still in their window\n"
        "re-asked 40% (23–59%, n=25), ▲ 0% → 40% (significant) · taken over 20% (9–39%, n=25), no clear change "
        "(n=25 vs 10)"
    )
    assert "escalated 0% (0–13%, n=25), ▼ 50% → 0% (significant)" in overall
    assert "reactions 5 positive (+5), 5 negative (+5) · of 25 answers" in overall
    assert "relevancy mean 3.00 (15) resolved vs 2.00 (10) failed" in overall
    assert "correctness top score on 5 of 5 answers (too few for a rate) where a teammate stepped in" in overall
    text = str(blocks)
    assert "outcomes: resolution (30-min window): resolved without help 50% (30–70%, n=20), no clear change" in text
    assert "outcomes: re-asked 50% (30–70%, n=20)" in text  # C1
    assert "outcomes: rates: too few (n=5)" in text and "no data the week before" in text  # C2
    assert "count answers whose outcome window has closed" in text


def test_home_shows_the_outcome_figures(runtime: Runtime, slack: FakeSlack) -> None:
    seed(runtime, datetime.now(UTC), times=5)
    view = publish_home(runtime, slack_client_for(runtime.settings), MembershipCache(runtime.redis), "U1")
    assert slack.published["U1"]["blocks"] == view["blocks"]
    home = str(view["blocks"])
    assert "*All channels*\\n" in home
    assert "\\noutcomes: resolution (30-min window): resolved without help 40% (23–59%, n=25), no clear change" in home
    assert "outcomes: re-asked 40% (23–59%, n=25)" in home
    assert "resolved without help 50% (30–70%, n=20), no clear change" in home
    assert "outcomes: rates: too few (n=5)" in home and "too few (n=5): 5 unresolved · 5 still" not in home
    assert "outcomes: correctness top score on 5 of 5 answers (too few for a rate) where a teammate stepped in" in home


def test_dry_run_text_shows_the_outcome_figures(runtime: Runtime, slack: FakeSlack) -> None:
    from common.messages.digest import digest_text
    from common.reports.figures import load_report

    now = datetime.now(UTC)
    seed(runtime, now, times=5)
    text = digest_text(load_report(runtime, period_for(now)), {}, {})
    overall, c1 = text.split("== #C1 ==")[0], text.split("== #C1 ==")[1].split("== #C2 ==")[0]
    assert "Outcomes: resolution (30-min window): resolved without help 40% (23–59%, n=25), no clear change" in overall
    assert "Outcomes: relevancy mean 3.00 (15) resolved vs 2.00 (10) failed" in overall
    assert "Outcomes: resolution (30-min window): resolved without help 50% (30–70%, n=20), no clear change" in c1
    assert slack.calls == []
