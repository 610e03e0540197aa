"""A channel's scores read back: the newest judged answers the degradation window weighs, after every judgment, and
the 7-day figures of `/judge stats`."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, case, func, select
from sqlalchemy.orm import Session

from store import bot_groups
from store.exchange_models import Exchange
from store.exchanges import in_report_channel
from store.judgments import is_current
from store.models import ALERTING_SOURCES, Judgment, JudgmentStatus, Pair, PairStatus, as_utc
from store.sampling import answer_weight, in_uniform_sample
from store.settings import TIME_WINDOW_MOST_ANSWERS

# The time window's sample is the newest answers of the window, at most this many: on a busy channel the last hour
# holds thousands, and this read runs after every judgment.
TIME_WINDOW_MOST = TIME_WINDOW_MOST_ANSWERS


def recent_scores(
    session: Session | Connection,
    channel_id: str,
    judge: str,
    *,
    last: int,
    since: datetime | None = None,
    most: int = TIME_WINDOW_MOST,
) -> list[tuple[float, datetime]]:
    """(score, answer capture time) of one judge's `ok` judgments of the channel's live answers (captured, and
    ingested), or of a bot's exchanges in no channel (`channel_id` its key, store.bot_groups), newest first:
    the latest `last` so judged, and, with `since`, also every later one captured at or after `since` (the time
    window), up to `most` in all.

    Runs after every judgment, so it must cost about that many rows whatever the tables hold and whatever the
    planner believes: no join, whose plan on a young database (no statistics yet) fetched the whole judgments
    table for every pair, and no anti-join for "current" either (`is_current`), which under statistics taken
    while another judge filled the table was planned as a scan of judgments per pair. One statement: the
    channel's newest judged pairs (a burst leaves many pending) on ix_pairs_channel_created, a few times `last`
    of them since some judgments are errors, each with its current score looked up by (pair_id, judge). When that
    batch holds too few, or does not reach back to `since`, the next, four times larger, continues from the
    oldest pair read (within the time window once the count window is full), up to all."""
    most = max(most, last)
    batch = max(3 * last, most)  # one batch usually serves both windows
    rows: list[tuple[float, datetime]] = []
    seen: set[int] = set()
    oldest: datetime | None = None  # the oldest pair read so far: the next batch continues from there
    bot = bot_groups.bot_of(channel_id)
    statements = _recent_statements(bot is not None)
    while True:
        parameters: dict[str, Any] = {"batch": batch, "judge": judge, "ok": JudgmentStatus.OK}
        if bot is None:
            parameters["channel"] = channel_id
        variant = "newest"
        if oldest is not None:
            variant, parameters["oldest"] = "older", oldest  # `<=`: a tie on the boundary is read again, skipped
            if since is not None and len(rows) >= last:
                variant, parameters["since"] = "in_window", since  # only the time window still wants rows
        read = session.execute(statements[variant], parameters).all()
        for pair_id, created, score, *made_by in read:
            if made_by and made_by[0] != bot:
                continue  # another bot's exchange in no channel
            if pair_id not in seen:
                seen.add(pair_id)
                if score is not None:
                    rows.append((score, as_utc(created)))
        if read:
            oldest = as_utc(read[-1].created_at)
        reaches_since = since is None or (oldest is not None and oldest < since)
        if len(read) < batch or len(rows) >= most or (len(rows) >= last and reaches_since):
            # enough, or that was every pair of the channel (or of the time window)
            return rows[:last] + [row for row in rows[last:most] if since is not None and row[1] >= since]
        batch *= 4


@functools.cache
def _recent_statements(of_bot: bool) -> dict[str, Any]:
    """recent_scores' statements, built once: it runs after every judgment, and building a statement (and its
    cache key) cost more than running it. The pairs in the index's order, so the scan stops after `batch` rows,
    each with its current judgment's score (the judgment of the highest pair version, if `ok`) read by a
    correlated subquery: a look-up on uq_judgments_pair_judge_version per pair, which no planner turns into a
    scan of the judgments table, in the same round trip. A bot's: the pairs in no channel (the same index, its
    channel null), each kept when an exchange of that bot made it (a look-up on ix_exchanges_pair per pair)."""
    current = Judgment.__table__.alias("current")
    score = (
        select(case((current.c.status == bindparam("ok"), current.c.score), else_=None))
        .where(current.c.pair_id == Pair.id, current.c.judge == bindparam("judge"))
        .order_by(current.c.pair_version.desc())
        .limit(1)
        .scalar_subquery()
    )
    if of_bot:
        # Its (first) exchange's bot, as store.exchanges.origin reads it: a correlated scalar subquery (a look-up
        # on ix_exchanges_pair per pair), never planned as the semi-join that, on a young database, read all of
        # the bot's exchanges for every pair. Read beside each pair, not filtered on in SQL: as a filter, a
        # planner with young statistics evaluated it for every pair in no channel before the limit (28,000 rows
        # touched for a window of 60 here; 8 million once, in CI). In the select list it runs for the `batch`
        # pairs read only; other bots' pairs are skipped in Python (`recent_scores`).
        made_by = (
            select(Exchange.bot).where(Exchange.pair_id == Pair.id).order_by(Exchange.id).limit(1).scalar_subquery()
        )
        columns = (Pair.id, Pair.created_at, score, made_by)
        where = (Pair.channel_id.is_(None),)
    else:
        columns = (Pair.id, Pair.created_at, score)
        where = (Pair.channel_id == bindparam("channel"),)
    pairs = select(*columns).where(
        *where,
        Pair.source.in_(ALERTING_SOURCES),
        Pair.status == PairStatus.JUDGED,
        in_uniform_sample(),  # under sampling the uniform subsample, unbiased without weights (store.sampling)
    )
    order = (Pair.created_at.desc(),)
    older = pairs.where(Pair.created_at <= bindparam("oldest"))
    return {
        "newest": pairs.order_by(*order).limit(bindparam("batch")),
        "older": older.order_by(*order).limit(bindparam("batch")),
        "in_window": older.where(Pair.created_at >= bindparam("since")).order_by(*order).limit(bindparam("batch")),
    }


@dataclass(frozen=True)
class ChannelJudgeStats:
    judge: str
    judged: int
    mean: float | None
    low: int
    max_score: float | None
    errors: int
    distribution: dict[int, int] = field(default_factory=dict)  # score -> ok judgments: the mean's interval
    # Sampling (RELMON_SAMPLE): Σ w and Σ w² (w = 1/π), over the ok judgments, those at or below the threshold, and
    # per score (π: each answer's inclusion probability; store.sampling.answer_weight; common.reports.weighted)
    weight_total: float = 0.0
    weight_squares: float = 0.0
    weight_low: float = 0.0
    weight_low_squares: float = 0.0
    weighted_distribution: dict[int, float] = field(default_factory=dict)
    weight_squares_distribution: dict[int, float] = field(default_factory=dict)
    nulls: int = 0  # the judge could not score (the pair lacked what it needs: a team judge's placeholders)


def channel_judge_stats(
    session: Session, channel_id: str, since: datetime, thresholds: dict[str, float]
) -> list[ChannelJudgeStats]:
    """Per judge, over live answers (captured or ingested) in a channel (or a bot's, store.bot_groups) since
    `since`: how many were scored, the mean,
    how many at or below the threshold, and how many could not be judged."""
    stats = []
    for judge, threshold in thresholds.items():
        scope = (
            select(Judgment, answer_weight().label("weight"))
            .join(Pair, Pair.id == Judgment.pair_id)
            .where(
                in_report_channel(channel_id),
                Pair.source.in_(ALERTING_SOURCES),  # live answers: captured, and sent to the ingest API
                Judgment.judge == judge,
                Judgment.created_at >= since,
                is_current(),
            )
            .subquery()
        )
        ok = scope.c.status == JudgmentStatus.OK
        weight = scope.c.weight
        judged, mean, low, max_score, errors, nulls, total, squares, low_weight, low_squares = session.execute(
            select(
                func.count().filter(ok),
                func.avg(scope.c.score).filter(ok),
                func.count().filter(ok, scope.c.score <= threshold),
                func.max(scope.c.max_score),
                func.count().filter(scope.c.status == JudgmentStatus.ERROR),
                func.count().filter(scope.c.status == JudgmentStatus.NULL),
                func.sum(weight).filter(ok),
                func.sum(weight * weight).filter(ok),
                func.sum(weight).filter(ok, scope.c.score <= threshold),
                func.sum(weight * weight).filter(ok, scope.c.score <= threshold),
            )
        ).one()
        scores = session.execute(
            select(func.round(scope.c.score), func.count(), func.sum(weight), func.sum(weight * weight))
            .where(ok)
            .group_by(func.round(scope.c.score))
        ).all()
        stats.append(
            ChannelJudgeStats(
                judge,
                int(judged or 0),
                float(mean) if mean is not None else None,
                int(low or 0),
                max_score,
                int(errors or 0),
                {int(score): int(count) for score, count, _, _ in scores if score is not None},
                float(total or 0.0),
                float(squares or 0.0),
                float(low_weight or 0.0),
                float(low_squares or 0.0),
                {int(score): float(weights) for score, _, weights, _ in scores if score is not None},
                {int(score): float(weights) for score, _, _, weights in scores if score is not None},
                int(nulls or 0),
            )
        )
    return stats


def judge_versions(
    session: Session, channel_id: str, since: datetime, judges: Iterable[str]
) -> dict[str, dict[tuple[str | None, str | None], datetime]]:
    """Each judge's (model, prompt version) that scored live answers of the channel (or a bot's) since `since`, with
    the time of the first answer each scored: what the digest's version notes read
    (common.reports.trust.VersionTally: ok judgments not reused from the cache), for `/judge stats`."""
    names = sorted(set(judges))
    if not names:
        return {}
    query = (
        select(Judgment.judge, Judgment.model, Judgment.prompt_version, func.min(Pair.created_at))
        .join(Pair, Pair.id == Judgment.pair_id)
        .where(
            in_report_channel(channel_id),
            Pair.source.in_(ALERTING_SOURCES),
            Judgment.judge.in_(names),
            Judgment.created_at >= since,
            Judgment.status == JudgmentStatus.OK,
            Judgment.cached.is_(False),
            is_current(),
        )
        .group_by(Judgment.judge, Judgment.model, Judgment.prompt_version)
    )
    found: dict[str, dict[tuple[str | None, str | None], datetime]] = {}
    for judge, model, prompt_version, first in session.execute(query):
        found.setdefault(judge, {})[(model, prompt_version)] = as_utc(first)
    return found
