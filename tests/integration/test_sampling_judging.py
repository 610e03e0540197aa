"""RELMON_SAMPLE=0.3 through the real judging path (the `judge_pair` task in process, the fake OpenAI, a real
database): answers whose conversation signalled a failure are all judged, those signalled before judging and those
signalled after it (a thumbs-down recorded by the outcome step brings a skipped answer back), the rest at 30% with
their probability stored; the digest's failure rate is the weighted one, and says so."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update

from bot.stats import channel_stats_message
from common.messages.digest import digest_text
from common.reports.figures import load_report
from common.reports.intervals import proportion
from common.reports.period import period_for
from store import outcomes as outcome_store
from store.db import Database
from store.models import Pair, PairStatus
from store.signals import NEGATIVE_REACTION, REASK
from tests.builders import installed_runtime
from tests.fakes.openai_server import FakeOpenAI
from tests.pipeline_helpers import add_pairs
from workers.outcome_watching import record_signals_in

CHANNEL = "C_SUPPORT"


def _answers(database: Database, count: int, *, failing: int, start: int) -> list[int]:
    """`count` answers, the first `failing` of them off topic (the fake judge scores those 0)."""
    bad = add_pairs(database, failing, channel=CHANNEL, answer="This is offtopic, sorry.", start=start)
    good = add_pairs(database, count - failing, channel=CHANNEL, start=start + failing)
    return bad + good


def _watch(database: Database, pair_ids: list[int]) -> None:
    closes = datetime.now(UTC) + timedelta(hours=1)
    with database.session() as session:
        for pair_id in pair_ids:
            pair = session.get(Pair, pair_id)
            outcome_store.insert_window(
                session,
                pair_id=pair_id,
                channel_id=CHANNEL,
                answer_ts=pair.answer_ts,
                thread_key=pair.answer_ts,
                asker="U_ASKER",
                closes_at=closes,
            )


def test_signalled_answers_are_all_judged_and_the_digest_rate_is_weighted(settings_for, database: Database) -> None:
    from workers.tasks.judging import judge_pair

    # The week's truth: 40 of 200 quiet answers fail (20%); 30 of 40 signalled ones do (75%).
    quiet = _answers(database, 200, failing=40, start=0)
    signalled_before = _answers(database, 20, failing=15, start=1_000)
    signalled_after = _answers(database, 20, failing=15, start=2_000)
    with (
        FakeOpenAI(latency_ms=0) as fake,
        installed_runtime(settings_for(openai_base_url=fake.base_url, sample="0.3")) as runtime,
    ):
        _watch(database, signalled_before + signalled_after)
        now = datetime.now(UTC)
        for pair_id in signalled_before:  # re-asked before its judgment ran
            assert record_signals_in(runtime, pair_id, [REASK], at=now) == [REASK]
        for pair_id in quiet + signalled_before + signalled_after:
            judge_pair.apply(args=[pair_id]).get()
        with database.session() as session:
            skipped_after = {
                pair_id
                for pair_id in signalled_after
                if session.get(Pair, pair_id).status == PairStatus.SKIPPED_SAMPLING
            }
        assert skipped_after  # some of them were sampled out before their thumbs-down came
        for pair_id in signalled_after:  # a thumbs-down after the judging's decision
            assert record_signals_in(runtime, pair_id, [NEGATIVE_REACTION], at=now) == [NEGATIVE_REACTION]
        with database.session() as session:
            assert {session.get(Pair, p).status for p in skipped_after} == {PairStatus.PENDING}
        for pair_id in skipped_after:  # the task the signal sent, as a worker runs it
            assert judge_pair.apply(args=[pair_id]).get() == PairStatus.JUDGED

        with database.session() as session:
            rows = {
                row.id: row for row in session.execute(select(Pair.id, Pair.status, Pair.inclusion_probability)).all()
            }
        for pair_id in signalled_before + signalled_after:
            assert rows[pair_id].status == PairStatus.JUDGED
            assert rows[pair_id].inclusion_probability is None  # judged for certain
        judged_quiet = [p for p in quiet if rows[p].status == PairStatus.JUDGED]
        assert {rows[p].status for p in quiet} == {PairStatus.JUDGED, PairStatus.SKIPPED_SAMPLING}
        assert {rows[p].inclusion_probability for p in judged_quiet} == {0.3}
        assert 0.2 < len(judged_quiet) / len(quiet) < 0.4

        report = load_report(runtime, period_for(datetime.now(UTC) + timedelta(minutes=1)))
        stats_reply = json.dumps(
            channel_stats_message(runtime, CHANNEL), ensure_ascii=False
        )  # `/judge stats`: the same weighted rate
    relevancy = report.overall.judge("relevancy")
    bad_quiet = set(quiet[:40])
    # The Hájek rate by hand: each signalled answer counts 1, each judged quiet one 1/0.3.
    weight = len(signalled_before + signalled_after) + len(judged_quiet) / 0.3
    failed = 30 + len([p for p in judged_quiet if p in bad_quiet]) / 0.3
    estimate = relevancy.low_estimate
    assert abs(estimate.value - failed / weight) < 1e-9
    assert estimate.n == 40 + len(judged_quiet)  # the judged n
    truth = (40 + 30) / 240
    assert estimate.low <= truth <= estimate.high
    unweighted = proportion(relevancy.low, relevancy.scored).value
    assert unweighted > estimate.value + 0.05  # the judged answers over-represent failures
    text = digest_text(report, {}, {})
    share = round(100 * len(judged_quiet) / len(quiet))
    assert f"judged {share}% of unsignalled answers; rates are weighted" in text
    assert f"{estimate.value * 100:.0f}% ≤ 2" in text and f"n={estimate.n})" in text
    assert f"judged {share}% of unsignalled answers; rates are weighted" in stats_reply
    assert f"{estimate.value * 100:.0f}% at or below 2 ({estimate.low * 100:.0f}–" in stats_reply


def test_the_change_and_degradation_alerts_read_the_uniform_subsample(settings_for, database: Database) -> None:
    """RELMON_SAMPLE=0.3, signalled answers failing 75% and the rest 20%: the judged answers lean to failures, and
    the change detector's and the degradation window's reads take only the answers whose hashed point is below 0.3,
    signalled or not (an unbiased sample of all traffic, no weights needed); sampling off, they read every one."""
    from store import change_reads
    from store.channel_scores import recent_scores
    from workers import sampling
    from workers.tasks.judging import judge_pair

    quiet = _answers(database, 200, failing=40, start=60_000)
    signalled = _answers(database, 40, failing=30, start=61_000)
    with (
        FakeOpenAI(latency_ms=0) as fake,
        installed_runtime(settings_for(openai_base_url=fake.base_url, sample="0.3")) as runtime,
    ):
        _watch(database, signalled)
        for pair_id in signalled:
            record_signals_in(runtime, pair_id, [REASK], at=datetime.now(UTC))
        for pair_id in quiet + signalled:
            judge_pair.apply(args=[pair_id]).get()
        with database.session() as session:
            rows = {r.id: r for r in session.execute(select(Pair.id, Pair.status, Pair.answer_ts)).all()}
            fed = change_reads.judged_since(session, 0, "relevancy", limit=10_000)
            window = recent_scores(session, CHANNEL, "relevancy", last=10_000)
    below = {p for p in quiet + signalled if sampling.chosen(sampling.sample_point(CHANNEL, rows[p].answer_ts), 0.3)}
    judged = {p for p in quiet + signalled if rows[p].status == PairStatus.JUDGED}
    assert below <= judged and set(signalled) <= judged
    assert {answer.pair_id for answer in fed} == below  # signalled ones above 0.3 left out, quiet ones below kept
    assert len(window) == len(below)
    bad = set(quiet[:40] + signalled[:30])
    truth = len(bad) / 240  # 29%
    all_judged = proportion(len(bad & judged), len(judged))
    uniform = proportion(len(bad & below), len(below))
    assert all_judged.low > truth  # what the detector read before: biased towards failures
    assert uniform.low <= truth <= uniform.high
    assert sum(score <= 2 for score, _at in window) == len(bad & below)  # the fake judge scores an off-topic one 0

    more = _answers(database, 20, failing=5, start=62_000)
    with (
        FakeOpenAI(latency_ms=0) as fake,
        installed_runtime(settings_for(openai_base_url=fake.base_url)) as runtime,  # sampling off
    ):
        for pair_id in more:
            judge_pair.apply(args=[pair_id]).get()
        with database.session() as session:
            after = max(answer.judgment_id for answer in fed)
            unsampled = change_reads.judged_since(session, after, "relevancy", limit=10_000)
    assert {answer.pair_id for answer in unsampled} == set(more)


def test_a_daily_cap_judges_its_share_of_yesterdays_volume(settings_for, database: Database) -> None:
    """RELMON_SAMPLE=60/day after a day of 600 unsignalled answers: today's answers are judged with probability 0.1,
    decided once for the day (every worker reads the same), and each judged answer stores it."""
    from workers.judging.sampling_step import cap_probability
    from workers.tasks.judging import judge_pair

    yesterday = _answers(database, 600, failing=0, start=10_000)
    signalled_yesterday = _answers(database, 50, failing=0, start=20_000)  # not counted: judged anyway
    _watch(database, signalled_yesterday)
    day_before = datetime.now(UTC) - timedelta(days=1)
    with database.session() as session:
        session.execute(update(Pair).where(Pair.id.in_(yesterday + signalled_yesterday)).values(created_at=day_before))
    today = _answers(database, 400, failing=0, start=30_000)
    with (
        FakeOpenAI(latency_ms=0) as fake,
        installed_runtime(settings_for(openai_base_url=fake.base_url, sample="60/day")) as runtime,
    ):
        for pair_id in signalled_yesterday:
            record_signals_in(runtime, pair_id, [REASK], at=datetime.now(UTC))
        assert cap_probability(runtime, 60, datetime.now(UTC)) == 0.1
        for pair_id in today:
            judge_pair.apply(args=[pair_id]).get()
        add_pairs(database, 600, channel=CHANNEL, start=40_000)  # more traffic today: tomorrow's business
        assert cap_probability(runtime, 60, datetime.now(UTC)) == 0.1  # fixed for the day
        with database.session() as session:
            rows = session.execute(select(Pair.status, Pair.inclusion_probability).where(Pair.id.in_(today))).all()
    judged = [p for status, p in rows if status == PairStatus.JUDGED]
    assert set(judged) == {0.1}
    assert 20 <= len(judged) <= 65  # about 40: the cap's share of today's 400


def test_the_backfill_samples_as_the_live_path(settings_for, database: Database) -> None:
    """`relmon backfill` at RELMON_SAMPLE=0.3: a history answer its thread signalled (recorded before its judging)
    is judged for certain; the rest by the hash, each one sampled in keeping 0.3."""
    from relmon.backfill.judging import SAMPLED_OUT, plan
    from workers import sampling

    history = add_pairs(database, 60, channel=CHANNEL, source="backfill", start=50_000)
    signalled = history[:20]
    _watch(database, signalled)
    with installed_runtime(settings_for(sample="0.3")) as runtime:
        for pair_id in signalled:
            record_signals_in(runtime, pair_id, [REASK], at=datetime.now(UTC))
        outcomes = {pair_id: plan(runtime, pair_id).outcome for pair_id in history}
    with database.session() as session:
        rows = {r.id: r for r in session.execute(select(Pair.id, Pair.answer_ts, Pair.inclusion_probability)).all()}
    for pair_id in signalled:
        assert outcomes[pair_id] != SAMPLED_OUT and rows[pair_id].inclusion_probability is None
    for pair_id in history[20:]:
        chosen = sampling.is_sampled_in(CHANNEL, rows[pair_id].answer_ts, 0.3, source="backfill")
        assert (outcomes[pair_id] != SAMPLED_OUT) == chosen
        assert rows[pair_id].inclusion_probability == (0.3 if chosen else None)
    assert SAMPLED_OUT in outcomes.values()
