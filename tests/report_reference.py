"""The digest's figures as they were computed before they became running tallies: every pair of both weeks read
into a list at once, then each figure a pass over the lists. Kept here only as the reference the streamed report
must equal (tests/integration/test_report_aggregates.py); the product's dataclasses hold the results.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from capture.outcomes import ESCALATION, HUMAN_TAKEOVER, NEGATIVE_REACTION, POSITIVE_REACTION, REASK, RESOLVED, failed
from capture.resolution import OPEN, TIERS
from common.reports.agreement import AgreementReport, AgreementTally
from common.reports.costs import Tokens, judgment_cost
from common.reports.outcomes import DailyOutcome, OutcomeReport, OutcomeStats, ScoreMean
from common.reports.resolution import ResolutionRules, ResolutionStats
from common.reports.stats import PRIMARY_JUDGE, SCALES, ChannelStats, DailyPoint, JudgeStats, Report, WorstAnswer
from common.reports.trust import (
    DISPUTED_SHOWN,
    Comparability,
    Disputed,
    Precision,
    Suggestion,
    Trust,
    VersionChange,
    canary_figures,
)
from store.models import ANSWER_SOURCES, ConfirmationStatus, Feedback, Judgment, JudgmentStatus, OutcomeSignal
from store.stats_queries import JudgmentRow, PairRow, _aware, _judgment_columns, period_pairs

OK, NULL, ERROR = JudgmentStatus.OK, JudgmentStatus.NULL, JudgmentStatus.ERROR


def all_pair_rows(session: Session, start: datetime, end: datetime) -> list[PairRow]:
    """Every pair of [start, end) with its judgments, votes and signals, in three unbatched queries."""
    pairs = session.execute(period_pairs(start, end)).all()
    ids = [row.id for row in pairs]
    signals = defaultdict(list)
    for pair_id, name in session.execute(
        select(OutcomeSignal.pair_id, OutcomeSignal.name)
        .where(OutcomeSignal.pair_id.in_(ids))
        .order_by(OutcomeSignal.id)
    ):
        signals[pair_id].append(name)
    votes = (
        select(
            Feedback.judgment_id,
            func.sum(case((Feedback.vote == "right", 1), else_=0)).label("right"),
            func.sum(case((Feedback.vote == "wrong", 1), else_=0)).label("wrong"),
        )
        .group_by(Feedback.judgment_id)
        .subquery()
    )
    judgments = defaultdict(list)
    for row in session.execute(
        select(*_judgment_columns(votes))
        .outerjoin(votes, votes.c.judgment_id == Judgment.id)
        .where(Judgment.pair_id.in_(ids))
        .order_by(Judgment.id)
    ):
        fields = dict(row._mapping)
        judgments[(fields.pop("pair_id"), bool(fields.pop("current")))].append(JudgmentRow(**fields))
    out = []
    for row in pairs:
        fields = row._asdict()
        watched = fields.pop("watched")
        exchange_bot, slack_bot = fields.pop("exchange_bot"), fields.pop("answer_bot_id")
        if fields["channel_id"] is None and exchange_bot is not None:  # an ingested exchange in no channel
            fields["channel_id"] = f"bot:{exchange_bot}"
        fields["bot"] = exchange_bot or slack_bot
        fields |= {
            "created_at": _aware(row.created_at),
            "channel_is_private": bool(row.channel_is_private),
            "has_reference": bool(row.has_reference),
            "window_closed": bool(row.window_closed) if watched else None,
        }
        out.append(
            PairRow(
                **fields,
                judgments=tuple(judgments[(row.id, True)]),
                superseded=tuple(judgments[(row.id, False)]),
                signals=tuple(signals[row.id]),
            )
        )
    return out


def captured(rows):
    return [row for row in rows if row.source in ANSWER_SOURCES and row.status != "merged"]


def judges_seen(rows):
    order = list(SCALES)
    names = {j.judge for row in rows for j in row.judgments}
    return sorted(names, key=lambda name: (order.index(name) if name in order else len(order), name))


def judge_stats(judge, rows, thresholds_for):
    scored = nulls = errors = low = 0
    total, counts, thresholds = 0.0, Counter(), set()
    for row in rows:
        for j in (j for j in row.judgments if j.judge == judge):
            if j.status == ERROR:
                errors += 1
            elif j.status == NULL or j.score is None:
                nulls += 1
            else:
                scored, total = scored + 1, total + j.score
                counts[round(j.score)] += 1
                threshold = thresholds_for(row.channel_id).get(judge)
                if threshold is not None:
                    thresholds.add(float(threshold))
                    low += j.score <= threshold
    lo, hi = SCALES.get(judge, (min(counts, default=0), max(counts, default=0)))
    return JudgeStats(
        judge,
        scored,
        nulls,
        errors,
        total / scored if scored else None,
        {s: counts.get(s, 0) for s in range(lo, hi + 1)},
        low,
        tuple(sorted(thresholds)),
    )


def worst_answers(rows, count):
    candidates = []
    for row in rows:
        usable = [j for j in row.judgments if j.status == OK and j.normalized_score is not None]
        j = min(usable, key=lambda j: j.normalized_score, default=None)
        if j is not None:
            candidates.append((j.normalized_score, row.id, row, j))
    candidates.sort(key=lambda item: (item[0], item[1]))
    return [
        WorstAnswer(
            row.id,
            row.channel_id,
            row.channel_is_private,
            row.answer_ts,
            row.thread_ts,
            j.judge,
            float(j.score if j.score is not None else 0.0),
            j.max_score,
            float(n),
        )
        for n, _, row, j in candidates[:count]
    ]


def token_use(rows, prices):
    prompt = cached = completion = 0
    cost = 0.0
    for j in (j for row in rows for j in (*row.judgments, *row.superseded) if not j.cached):
        prompt, completion = prompt + j.prompt_tokens, completion + j.completion_tokens
        cached += min(j.cached_tokens, j.prompt_tokens)
        cost += judgment_cost(j, prices)
    return Tokens(prompt=prompt, completion=completion, cost_usd=cost, cached=cached)


def channel_stats(channel_id, rows, thresholds_for, prices, judges, worst):
    answers = captured(rows)
    statuses = Counter(row.status for row in answers)
    judged = sum(1 for row in answers if any(j.status in (OK, NULL) for j in row.judgments))
    errored = sum(
        1
        for row in answers
        if not any(j.status in (OK, NULL) for j in row.judgments)
        and row.judgments
        and all(j.status == ERROR for j in row.judgments)
    )
    return ChannelStats(
        channel_id,
        len(answers),
        judged,
        statuses["skipped_sampling"],
        statuses["skipped_budget"],
        sum(statuses[s] for s in ("no_question", "empty", "deleted")),
        statuses["settling"] + statuses["pending"],
        errored,
        {name: judge_stats(name, answers, thresholds_for) for name in judges},
        sum(j.votes_right for row in answers for j in row.judgments),
        sum(j.votes_wrong for row in answers for j in row.judgments),
        worst_answers(answers, worst),
        token_use(rows, prices),
        **sampling_counts(answers),
    )


def sampling_counts(answers):
    """Sampling's figures, counted afresh: the answers no failure signal made certain, judged or skipped by
    sampling, and whether any was left out or judged with a chance below 1."""
    quiet = [row for row in answers if not set(row.signals) & {"reask", "human_takeover", "escalation",
                                                                "negative_reaction"}]  # fmt: skip
    skipped = [row for row in quiet if row.status == "skipped_sampling"]
    judged = [row for row in quiet if row.status != "skipped_sampling" and row.judgments]
    below_one = any(row.inclusion_probability is not None for row in judged)
    return {
        "unsignalled_judged": len(judged),
        "unsignalled_decided": len(judged) + len(skipped),
        "sampled": bool(skipped) or below_one,
    }


def local_days(period):
    """The calendar days of the period in its time zone, worked out afresh (from the local dates of its ends)."""
    tz = ZoneInfo(period.timezone)
    day, last = period.start.astimezone(tz).date(), (period.end - timedelta(microseconds=1)).astimezone(tz).date()
    while day <= last:
        yield day
        day += timedelta(days=1)


def local_day(row, period, days):
    """The day the question was asked, there; the answer's day when the question's was before the period's."""
    tz = ZoneInfo(period.timezone)
    asked = row.asked_at.astimezone(tz).date()
    return asked if asked in days else row.created_at.astimezone(tz).date()


def daily_series(rows, period, judge):
    days = list(local_days(period))
    points = []
    for date_ in days:
        day = [row for row in captured(rows) if local_day(row, period, days) == date_]
        scores = [
            j.score for r in day for j in r.judgments if j.judge == judge and j.status == OK and j.score is not None
        ]
        points.append(DailyPoint(date_, len(day), len(scores), sum(scores) / len(scores) if scores else None))
    return points


def trust_report(current, previous, judges, thresholds_for, canary_runs):
    votes = [
        (row.channel_id, j.judge, j.score, j.votes_right > j.votes_wrong)
        for row in current
        for j in row.judgments
        if j.score is not None and j.votes_right != j.votes_wrong
    ]
    counts = defaultdict(lambda: [0, 0])
    groups = defaultdict(list)
    for channel, judge, score, agreed in votes:
        for place in (None, channel):
            counts[(place, judge)][0 if agreed else 1] += 1
        groups[(channel, judge)].append((score, agreed))
    by_place = lambda item: (item[0][0] or "", item[0][1])  # noqa: E731
    precision = [Precision(c, j, a, d) for (c, j), (a, d) in sorted(counts.items(), key=by_place)]
    suggestions = []
    for (channel, judge), pairs in sorted(groups.items(), key=by_place):
        current_threshold = thresholds_for(channel).get(judge)
        if current_threshold is None or len(pairs) < 20:
            continue

        def figures(threshold, pairs=pairs):
            alerted = [agreed for score, agreed in pairs if score <= threshold]
            return (sum(alerted) / len(alerted) if alerted else None), sum(alerted)

        now, caught = figures(current_threshold)
        best = None
        for threshold in range(math.ceil(current_threshold) - 1, SCALES.get(judge, (0, 0))[0] - 1, -1):
            then, still = figures(threshold)
            if (
                now is not None
                and then is not None
                and still >= caught
                and then > now
                and (best is None or then > best[1])
            ):
                best = (float(threshold), then, now)
        if best is not None:
            suggestions.append(
                Suggestion(channel, judge, float(current_threshold), best[0], best[2], best[1], len(pairs))
            )
    status = [(row, j, j.confirmation_status) for row in current for j in row.judgments]
    disputed = [
        Disputed(row.id, row.channel_id, j.judge, j.score, j.confirmation_score)
        for row, j, s in status
        if s == ConfirmationStatus.DISPUTED and j.score is not None
    ]

    def versions(rows, judge):
        """Each version that scored this judge's answers, with the first answer it judged (the pair's time)."""
        seen = {}
        for r in rows:
            for j in r.judgments:
                if j.judge == judge and j.status == OK and not j.cached:
                    key = (j.model, j.prompt_version)
                    seen[key] = min(seen.get(key, r.created_at), r.created_at)
        return seen

    def plain(version):
        return version[0] or "", version[1] or ""

    comparability = {}
    for judge in judges:
        now_seen, before_v = versions(current, judge), set(versions(previous, judge))
        now_v = set(now_seen)
        started = tuple((v, now_seen[v]) for v in sorted(now_v, key=lambda v: (now_seen[v], plain(v))))
        if len(now_v) > 1:
            models = sorted({model or "?" for model, _ in now_v})
            what = "model" if len(models) > 1 else "prompt"
            found = Comparability(
                judge,
                False,
                f"the {judge} judge's {what} changed during the week ({', '.join(models)})",
                VersionChange(what, started, tuple(sorted(before_v, key=plain))),
            )
        elif now_v and before_v and now_v != before_v:
            ((model, _),) = now_v
            what = "model" if model != sorted(before_v, key=plain)[0][0] else "prompt"
            found = Comparability(
                judge,
                False,
                f"the {judge} judge's {what} differs from last week's: not compared",
                VersionChange(what, started, tuple(sorted(before_v, key=plain))),
            )
        else:
            found = Comparability(judge, True)
        comparability[judge] = found
    return Trust(
        precision=precision,
        suggestions=suggestions,
        # The product keeps the disputed ones the trust lines show and counts the rest: so does the reference.
        disputed=disputed[:DISPUTED_SHOWN],
        more_disputed=max(0, len(disputed) - DISPUTED_SHOWN),
        confirmed=sum(s == ConfirmationStatus.CONFIRMED for _, _, s in status),
        unconfirmed=sum(s == ConfirmationStatus.UNCONFIRMED for _, _, s in status),
        canary=canary_figures(canary_runs),
        comparability=comparability,
    )


def tier_stats(key, rows, rules):
    """The resolution tiers, answer by answer (the rule itself is tests/unit/test_resolution_tiers.py's)."""
    found = [rules.of(row) for row in rows]
    counts = Counter(f.tier for f in found if f is not None)
    reasons = Counter(f.reason for f in found if f is not None and f.tier != OPEN and f.reason is not None)
    return ResolutionStats(key, {tier: counts[tier] for tier in TIERS}, dict(reasons), counts[OPEN])


def outcome_stats(channel_id, rows, judge, rules=None):
    done = [row for row in rows if row.window_closed]

    def score(row, name=judge):
        return next(
            (j.score for j in row.judgments if j.judge == name and j.status == OK and j.score is not None), None
        )

    resolved = [s for r in done if RESOLVED in r.signals and (s := score(r)) is not None]
    failing = [s for r in done if failed(r.signals) and (s := score(r)) is not None]
    teammate = [
        j
        for r in done
        if HUMAN_TAKEOVER in r.signals and r.has_reference
        for j in r.judgments
        if j.judge == "correctness" and j.status == OK and j.score is not None
    ]
    count = lambda name: sum(1 for row in done if name in row.signals)  # noqa: E731
    return OutcomeStats(
        channel_id,
        sum(1 for row in rows if row.window_closed is False),
        len(done),
        count(RESOLVED),
        count(REASK),
        count(HUMAN_TAKEOVER),
        count(ESCALATION),
        count(POSITIVE_REACTION),
        count(NEGATIVE_REACTION),
        sum(1 for row in done if failed(row.signals)),
        ScoreMean(sum(resolved), len(resolved)),
        ScoreMean(sum(failing), len(failing)),
        len(teammate),
        sum(1 for j in teammate if j.max_score is not None and j.score >= j.max_score),
        tier_stats(channel_id, rows, rules) if rules is not None else ResolutionStats(channel_id),
    )


def build_report(period, current, previous, thresholds_for, prices, *, channels, is_watched, canary_runs, worst=3):
    current = [row for row in current if row.channel_id is None or is_watched(row.channel_id)]
    previous = [row for row in previous if row.channel_id is None or is_watched(row.channel_id)]
    now_answers, before_answers = captured(current), captured(previous)
    judges = judges_seen([*now_answers, *before_answers])
    ids = {row.channel_id for row in now_answers} | {c for c in channels if is_watched(c)}
    channel_ids = sorted(c for c in ids if c is not None)

    def stats(channel, rows):
        mine = rows if channel is None else [row for row in rows if row.channel_id == channel]
        return channel_stats(channel, mine, thresholds_for, prices, judges, worst)

    seen_now = judges_seen(now_answers)
    main = (PRIMARY_JUDGE if PRIMARY_JUDGE in seen_now or not seen_now else seen_now[0]) if judges else PRIMARY_JUDGE

    rules = ResolutionRules(period.end, timedelta(seconds=1800), thresholds_for)  # RELMON_OUTCOME_WINDOW's default

    def outcomes_of(channel, rows):
        return outcome_stats(channel, [row for row in rows if row.channel_id == channel], main, rules)

    def bots_of(rows):
        names = sorted({row.bot for row in rows if row.bot is not None and rules.of(row) is not None})
        return {bot: tier_stats(bot, [row for row in rows if row.bot == bot], rules) for bot in names}

    tiers = {row.id: rules.of(row) for row in now_answers}
    closed = [row for row in now_answers if tiers[row.id] is not None and tiers[row.id].tier != OPEN]
    daily_outcomes = []
    days = list(local_days(period))
    for date_ in days:
        day = [row for row in closed if local_day(row, period, days) == date_]
        resolved = sum(1 for row in day if tiers[row.id].tier == "resolved")
        daily_outcomes.append(DailyOutcome(date_, len(day), resolved))
    return Report(
        period=period,
        overall=stats(None, current),
        previous_overall=stats(None, previous),
        channels=[stats(channel, current) for channel in channel_ids],
        previous_channels={channel: stats(channel, previous) for channel in channel_ids},
        daily=daily_series(current, period, main),
        primary_judge=main,
        thresholds={channel: dict(thresholds_for(channel)) for channel in [None, *channel_ids]},
        trust=trust_report(now_answers, before_answers, judges, thresholds_for, canary_runs),
        outcomes=OutcomeReport(
            main,
            outcome_stats(None, now_answers, main, rules),
            outcome_stats(None, before_answers, main, rules),
            {c: outcomes_of(c, now_answers) for c in channel_ids},
            {c: outcomes_of(c, before_answers) for c in channel_ids},
            daily_outcomes,
            bots_of(now_answers),
            bots_of(before_answers),
            1800,
        ),
        agreement=AgreementReport(
            agreement_of(now_answers, thresholds_for), agreement_of(before_answers, thresholds_for)
        ),
    )


def agreement_of(rows, thresholds_for):
    """Each judge's agreement with the team over a list of captured answers (the same tally the stream feeds: this
    checks that the stream gives it the same rows, in the same order, as the per-row read)."""
    tally = AgreementTally(thresholds_for)
    for row in rows:
        tally.add(row)
    return tally.result()
