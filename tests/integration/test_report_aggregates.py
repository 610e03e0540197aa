"""The report is streamed through running tallies (a batch of pairs in memory at a time): on a seeded store
(SQLite and PostgreSQL) it must equal, figure for figure and rendered, what the per-row computation of every pair
read at once made (tests/report_reference.py), for a week's digest and for a backfill's month."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import event, select

from common.messages.digest import digest_message, digest_text
from common.reports.figures import load_report, prices_for
from common.reports.golden import GoldenFigures
from common.reports.period import period_for
from relmon.backfill.report import backfill_period
from store import regress_runs, stats_queries
from store.golden_models import GoldenItem
from store.models import Feedback, Judgment, OutcomeSignal, OutcomeWindow, Pair, as_utc
from tests import report_reference
from tests.builders import make_settings

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
SCALE = {"relevancy": (0, 4), "correctness": (0, 2), "grounded": (1, 5)}
RULES = """
channels:
  C2: {threshold: 3}
  COFF: {watch: false}
"""
BATCH = 7  # pairs per batch here: every period spans many batches
PAIRS = 500


def seed(session, rng: random.Random, pairs: int = PAIRS) -> None:
    """Answers over 40 days in three watched channels (one private), one unwatched, on-demand requests without a
    channel; every status and source; judgments ok, null and error, re-judged versions, cached and batch calls,
    model and prompt changes, second opinions, votes, outcome windows and their signals. Inserted out of time
    order, as a backfill inserts its history after live answers."""
    # Most of them in the two weeks a digest reads, the rest over the month a backfill reads; shuffled.
    days = [rng.uniform(0, 14) if rng.random() < 0.6 else rng.uniform(0, 40) for _ in range(pairs)]
    moments = [NOW - timedelta(days=d) for d in days]
    statuses = ["judged"] * 12 + ["skipped_sampling", "skipped_budget", "no_question", "empty", "deleted"]
    statuses += ["settling", "pending", "merged"]
    for n, created_at in enumerate(moments):
        source = rng.choice(["capture"] * 6 + ["backfill", "import", "command"])
        channel = rng.choice(["C1", "C1", "C2", "CPRIV", "COFF"]) if source != "command" or rng.random() < 0.5 else None
        this_week = created_at >= NOW - timedelta(days=7)
        # The question up to two hours before its answer (some across midnight, or before the period began);
        # one in seven has none stored.
        asked = created_at - timedelta(minutes=n * 7 % 120)
        pair = Pair(
            question_ts=f"{asked.timestamp():.6f}" if n % 7 else None,
            channel_id=channel, answer_ts=f"1763000000.{n:06d}", thread_ts=f"1763000000.{n:06d}", source=source,
            status=rng.choice(statuses), channel_is_private=channel == "CPRIV", created_at=created_at,
            question_text=f"question {n}", answer_text=f"answer {n}", version=rng.choice([1, 1, 1, 2]),
            reference_text="a teammate's reply" if rng.random() < 0.3 else None,
        )  # fmt: skip
        session.add(pair)
        session.flush()
        judges = (
            ["relevancy", *rng.sample(["correctness", "grounded"], rng.randint(0, 2))] if rng.random() < 0.9 else []
        )
        for judge in judges:
            for version in range(1, pair.version + 1):
                session.add(judgment := make_judgment(rng, pair.id, judge, version, this_week))
                session.flush()
                if judgment.score is not None:
                    for voter, vote in enumerate(votes(rng, judgment.score - SCALE[judge][0])):
                        session.add(Feedback(judgment_id=judgment.id, user_id=f"U{voter}", vote=vote))
        if rng.random() < 0.7 and channel is not None:
            closes_at = created_at + timedelta(hours=24)
            session.add(OutcomeWindow(
                pair_id=pair.id, channel_id=channel, answer_ts=pair.answer_ts, thread_key=pair.answer_ts,
                closes_at=closes_at, closed_at=closes_at if rng.random() < 0.75 else None,
            ))  # fmt: skip
            names = ["resolved", "reask", "human_takeover", "escalation", "positive_reaction", "negative_reaction"]
            for name in rng.sample(names, rng.randint(0, 3)):
                session.add(OutcomeSignal(pair_id=pair.id, name=name, after_seconds=60.0))


def votes(rng: random.Random, above_bottom: float) -> list[str]:
    """Up to three voters, mostly of one mind: the lowest two scores mostly right to alert on, the third never
    (so a stricter threshold would have been more precise: a suggestion), the rest either way; a tie now and
    then."""
    agreed = rng.random() < (0.85 if above_bottom <= 1 else 0.0 if above_bottom == 2 else 0.4)
    many = rng.choice([0, 1, 1, 2, 3])
    return [
        ("right" if agreed else "wrong") if rng.random() < 0.9 else rng.choice(["right", "wrong"]) for _ in range(many)
    ]


def make_judgment(rng: random.Random, pair_id: int, judge: str, version: int, this_week: bool) -> Judgment:
    low, high = SCALE[judge]
    status = rng.choice(["ok"] * 8 + ["null", "error"])
    score = rng.randint(low, high) if status == "ok" else None
    model, prompt = "m1", "p1"
    if this_week and judge == "relevancy" and rng.random() < 0.2:
        prompt = "p2"  # the prompt changed during the week
    if this_week and judge == "correctness":
        model = "m2"  # another model than last week's
    confirmation = None
    if score is not None and score <= low + 1:
        confirmation = rng.choice([None, "confirmed", "disputed", "unconfirmed"])
    prompt_tokens = rng.randint(100, 2000)
    return Judgment(
        pair_id=pair_id, judge=judge, pair_version=version, status=status, score=score, max_score=high,
        normalized_score=None if score is None else (score - low) / (high - low), model=model, prompt_version=prompt,
        prompt_tokens=prompt_tokens, cached_tokens=rng.choice([0, 0, prompt_tokens // 2, prompt_tokens + 10]),
        completion_tokens=rng.randint(10, 200), cached=rng.random() < 0.1, batch=rng.random() < 0.2,
        confirmation_status=confirmation, confirmation_score=None if confirmation is None else high,
    )  # fmt: skip


@pytest.fixture
def runtime(db_url: str, tmp_path: Path, runtime_for, monkeypatch: pytest.MonkeyPatch):
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    settings = make_settings(
        database_url=db_url, data_dir=tmp_path, channel_rules_file=rules,
        watched_channels=["C1", "C2", "CPRIV", "CQUIET"], cost_per_million_input_tokens=0.15,
        cost_per_million_output_tokens=0.6,
    )  # fmt: skip
    runtime = runtime_for(settings)
    with runtime.db.session() as session:
        seed(session, random.Random(17))
    monkeypatch.setattr(stats_queries, "_CHUNK", BATCH)
    return runtime


def reference_report(runtime, period):
    settings, rules = runtime.settings, runtime.rules
    with runtime.db.session() as session:
        current = report_reference.all_pair_rows(session, period.start, period.end)
        previous = report_reference.all_pair_rows(session, period.previous_start, period.start)
    report = report_reference.build_report(
        period,
        current,
        previous,
        lambda channel: rules.for_channel(channel, settings).thresholds,
        prices_for(runtime),
        channels=set(settings.watched_channels) | set(rules.channels),
        is_watched=lambda channel: rules.for_channel(channel, settings).watch,
        canary_runs=[],
    )
    numbers = reference_prompt_numbers(runtime, [c.judge for c in report.trust.comparability.values() if c.change])
    report = replace(report, trust=replace(report.trust, version_numbers=numbers))
    return replace(report, golden=reference_golden(runtime, period))


def reference_prompt_numbers(runtime, judges) -> dict[str, dict[str, int]]:
    """Each judge's prompt versions numbered by their first judgment, read judgment by judgment."""
    first: dict[str, dict[str, datetime]] = {}
    with runtime.db.session() as session:
        for judgment in session.scalars(select(Judgment)):
            if judgment.judge in judges and judgment.prompt_version is not None:
                known = first.setdefault(judgment.judge, {})
                at = as_utc(judgment.created_at)
                known[judgment.prompt_version] = min(known.get(judgment.prompt_version, at), at)
    return {
        judge: {version: n for n, version in enumerate(sorted(seen, key=lambda v: (seen[v], v)), start=1)}
        for judge, seen in first.items()
    }


def reference_golden(runtime, period) -> GoldenFigures:
    """The golden set's line, counted item by item (the report counts it in SQL)."""
    with runtime.db.session() as session:
        items = [item for item in session.scalars(select(GoldenItem)) if item.removed_at is None]
        last = regress_runs.last_finished_summary(session)
    grown = sum(1 for item in items if as_utc(item.created_at) >= period.start)
    return GoldenFigures(len(items), grown, None if last is None else (as_utc(last[0]), last[1], last[2]))


@pytest.mark.parametrize("kind", ["week", "backfill"])
def test_the_streamed_report_equals_the_per_row_computation(runtime, kind: str) -> None:
    period = period_for(NOW) if kind == "week" else backfill_period(NOW - timedelta(days=30), NOW, "UTC", "backfill")
    expected = reference_report(runtime, period)
    report = load_report(runtime, period)
    assert report == expected
    prices = prices_for(runtime)
    assert digest_text(report, {}, {}, prices) == digest_text(expected, {}, {}, prices)
    assert digest_message(report, {}, {}, prices) == digest_message(expected, {}, {}, prices)
    # The seed reaches every kind of figure, so the equality above says something about each.
    assert [c.channel_id for c in report.channels] == ["C1", "C2", "CPRIV", "CQUIET"]
    assert report.overall.seen > 40 and len(report.overall.worst) == 3 and report.overall.errored
    assert report.overall.not_judged and report.overall.waiting and report.overall.tokens.cached
    # Calendar days from 09:00 to 09:00: the first and last in part (8 for the week, 31 for the 30 days).
    assert report.previous_overall.seen and len(report.daily) == (8 if kind == "week" else 31)
    assert report.trust.more_disputed > 0 and report.trust.confirmed and report.trust.unconfirmed
    assert report.trust.suggestions and report.trust.precision and len(report.trust.notes) == 2
    assert report.outcomes.overall.closed and report.outcomes.overall.open and report.outcomes.overall.failed
    assert report.outcomes.overall.teammate_judged and report.outcomes.overall.score_resolved.count


def test_pairs_streamed_a_batch_at_a_time_read_as_the_unbatched_query(runtime) -> None:
    period = backfill_period(NOW - timedelta(days=40), NOW + timedelta(seconds=1), "UTC", "backfill")
    queries: list[str] = []
    listen = lambda *args: queries.append(args[2])  # noqa: E731
    with runtime.db.session() as session:
        expected = report_reference.all_pair_rows(session, period.start, period.end)
        event.listen(runtime.db.engine, "before_cursor_execute", listen)
        try:
            stream = stats_queries.stream_pair_rows(session, period.start, period.end)
            first = [next(stream) for _ in range(BATCH)]
            judgment_reads = [q for q in queries if "FROM judgments" in q]
            assert len(judgment_reads) == 1  # the first batch's only: nothing further was read
            rows = [*first, *stream]
        finally:
            event.remove(runtime.db.engine, "before_cursor_execute", listen)
    assert len(rows) == PAIRS and rows == expected
    assert len([q for q in queries if "FROM outcome_signals" in q]) == -(-len(rows) // BATCH)
