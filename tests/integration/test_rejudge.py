"""Judging the final text, through signed events: an edit re-opens a judged answer (at most RELMON_MAX_REJUDGE
times), a root's reply bookkeeping does not, a follow-up settles with the earlier turns of its thread, and the
store reads only the current judgment of each answer while keeping the older ones."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update

from store.db import Database
from store.judgments import export_rows, is_current, stored_judges
from store.models import Judgment, Pair, PairStatus
from store.pairs import upsert_captured
from tests import slack_requests as sr
from tests import slack_shapes as ss
from tests.bot_harness import ServedBot
from tests.builders import SECRET
from workers.pairs.settling import settle

C = "C_SUPPORT"


def send(bot: ServedBot, event: dict) -> None:
    response = sr.post(bot.url, sr.envelope(event), SECRET)
    assert response.status_code == 200, response.text


def judge_now(bot: ServedBot, pair: Pair, score: float) -> None:
    """What judge_pair stores for the pair's current version, and its status."""
    with bot.runtime.db.session() as session:
        session.add(Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=score, pair_version=pair.version))
        session.get(Pair, pair.id).status = PairStatus.JUDGED


def test_an_edit_after_judging_is_judged_again_up_to_the_limit(make_bot) -> None:
    bot = make_bot(max_rejudge=2)
    q = sr.human_message(C, sr.next_ts(), "How do I rotate my key?")
    answer = sr.bot_message(C, sr.next_ts(), "Looking into it...", thread_ts=q["ts"])
    send(bot, q)
    send(bot, answer)
    texts = ["Press Rotate.", "Press Rotate in Settings.", "Press Rotate in Settings > Keys."]
    for round_, text in enumerate(texts):
        [pair] = bot.pairs()
        assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
        judge_now(bot, bot.pairs()[0], score=round_)
        send(bot, sr.message_changed(answer, text))
        [pair] = bot.pairs()
        if round_ < 2:
            assert (pair.status, pair.answer_text, pair.rejudges) == (PairStatus.SETTLING, text, round_ + 1)
    # The third edit finds the answer re-judged twice already: it stays as judged.
    assert (pair.status, pair.answer_text, pair.rejudges) == (PairStatus.JUDGED, texts[1], 2)
    with bot.runtime.db.session() as session:
        versions = session.execute(select(Judgment.pair_version).order_by(Judgment.pair_version)).scalars().all()
        assert versions == [1, 2, 3]  # the history stays
        current = session.execute(select(Judgment.score).where(is_current())).scalars().all()
        assert current == [2]
        assert stored_judges(session, pair.id, 2) and list(stored_judges(session, pair.id, 4)) == []
        rows = list(export_rows(session))
        assert [(row["pair_version"], row["current"]) for row in rows] == [(1, False), (2, False), (3, True)]


def reopened_by_an_edit(database: Database, answer_ts: str, status: str, rejudges: int, max_rejudge: int) -> bool:
    """Whether an edit of an answer whose pair is in `status`, re-judged `rejudges` times, re-opens it: the
    capture's upsert (store.pairs.upsert_captured) as an edit runs it. The pair is checked to agree."""
    with database.session() as session:
        pair_id = upsert_captured(session, channel_id=C, answer_ts=answer_ts, answer_text="first").pair_id
        session.execute(update(Pair).where(Pair.id == pair_id).values(status=status, rejudges=rejudges))
    with database.session() as session:
        edit = upsert_captured(
            session, channel_id=C, answer_ts=answer_ts, answer_text="edited", max_rejudge=max_rejudge
        )
        pair = session.get(Pair, pair_id)
        expected = (PairStatus.SETTLING, "edited") if edit.accepted else (status, "first")
        assert (pair.status, pair.answer_text) == expected
    return edit.accepted


@pytest.mark.parametrize("status", [PairStatus.SETTLING, PairStatus.PENDING, PairStatus.NO_QUESTION, PairStatus.EMPTY])
def test_an_answer_not_yet_judged_is_always_reopened(database, status: str) -> None:
    assert reopened_by_an_edit(database, "1.0", status, rejudges=99, max_rejudge=0)


def test_a_judged_answer_is_reopened_until_it_was_rejudged_enough(database) -> None:
    reopened = [reopened_by_an_edit(database, f"{n}.0", PairStatus.JUDGED, n, 3) for n in range(5)]
    assert reopened == [True, True, True, False, False]
    assert not reopened_by_an_edit(database, "9.0", PairStatus.JUDGED, 0, 0)  # RELMON_MAX_REJUDGE=0: judged for good


@pytest.mark.parametrize("status", [PairStatus.DELETED, PairStatus.MERGED, PairStatus.SKIPPED_SAMPLING])
def test_deleted_merged_or_sampled_out_answers_stay_as_they_are(database, status: str) -> None:
    assert not reopened_by_an_edit(database, "1.0", status, rejudges=0, max_rejudge=3)


def test_root_bookkeeping_does_not_reopen_a_judged_answer(make_bot) -> None:
    bot = make_bot()
    q = sr.human_message(C, sr.next_ts(), "Status of the outage?")
    answer = sr.bot_message(C, sr.next_ts(), "All systems are up.")  # top-level: the root of a later thread
    send(bot, q)
    send(bot, answer)
    [pair] = bot.pairs()
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    judge_now(bot, pair, score=4)
    reply = sr.human_message(C, sr.next_ts(), "thanks", thread_ts=answer["ts"])
    send(bot, reply)
    send(bot, ss.root_bookkeeping(answer, reply["ts"], ["U_ASKER"], sr.next_ts()))
    [pair] = bot.pairs()
    assert (pair.status, pair.version, pair.rejudges) == (PairStatus.JUDGED, 1, 0)


def _follow_up(bot: ServedBot) -> Pair:
    root = sr.human_message(C, sr.next_ts(), "How do I export my data?")
    first = sr.bot_message(C, sr.next_ts(), "Use Settings > Export on the web.", thread_ts=root["ts"])
    follow_up = sr.human_message(C, sr.next_ts(), "And on <@U_ASKER>'s Android?", thread_ts=root["ts"])
    second = sr.bot_message(C, sr.next_ts(), "Tap Menu > Export.", thread_ts=root["ts"])
    for event in (root, first, follow_up, second):
        send(bot, event)
    for pair in bot.pairs():
        settle(bot.runtime, pair.id, pair.version)
    [_, pair] = bot.pairs()
    return pair


def test_a_follow_up_settles_with_the_earlier_turns(make_bot) -> None:
    pair = _follow_up(make_bot())
    assert pair.question_text == "And on @ana's Android?"
    assert pair.context_text == "[customer] How do I export my data?\n[bot] Use Settings > Export on the web."
    [first] = [p for p in make_bot().pairs() if p.id != pair.id]
    assert first.context_text is None


def test_no_earlier_turns_when_turned_off(make_bot) -> None:
    pair = _follow_up(make_bot(context_turns=0))
    assert (pair.status, pair.context_text) == (PairStatus.PENDING, None)


def test_a_rejudged_answer_costs_both_judgments_but_scores_the_current_one(database) -> None:
    """The digest's figures from the store: spend counts the superseded judgment's tokens, scores do not."""
    from datetime import UTC, datetime, timedelta

    from common.reports.costs import Prices
    from common.reports.period import period_for
    from store.stats_queries import stream_pair_rows
    from tests.report_tallies import build_report

    now = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    with database.session() as session:
        for n, versions in enumerate([[(1, 1000, 100), (4, 2000, 200)], [(2, 400, 40)]]):
            pair = Pair(channel_id=C, answer_ts=f"1763000000.{n:06d}", status="judged", version=len(versions),
                        created_at=now - timedelta(days=1))  # fmt: skip
            session.add(pair)
            session.flush()
            for version, (score, prompt, completion) in enumerate(versions, start=1):
                session.add(Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=score, max_score=4,
                                     normalized_score=score / 4, prompt_tokens=prompt, completion_tokens=completion,
                                     pair_version=version))  # fmt: skip
    period = period_for(now, "UTC")
    with database.session() as session:
        rows = list(stream_pair_rows(session, period.start, period.end))
    assert [[j.score for j in row.judgments] for row in rows] == [[4], [2]]
    assert [[j.score for j in row.superseded] for row in rows] == [[1], []]
    prices = Prices(input_per_million=0.15, output_per_million=0.60)
    overall = build_report(period, rows, [], lambda _c: {"relevancy": 2}, prices).overall
    assert overall.judge("relevancy").mean == 3.0 and overall.judge("relevancy").scored == 2
    assert (overall.tokens.prompt, overall.tokens.completion) == (3400, 340)
    assert overall.tokens.cost_usd == pytest.approx(3400 / 1e6 * 0.15 + 340 / 1e6 * 0.60)
