"""The digest tests' week and rows: the period they report on, the prices and thresholds they use, and stored
answers (`pair`) with their judgments (`verdict`) shaped as the digest's queries return them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from common.reports.costs import Prices
from common.reports.period import period_for
from store.stats_queries import JudgmentRow, PairRow

NOW = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)  # a Monday, ISO week 48
PERIOD = period_for(NOW, "UTC")
PRICES = Prices(input_per_million=0.15, output_per_million=0.60)
THRESHOLDS = {"C1": {"relevancy": 2}, "C2": {"relevancy": 3}}


def thresholds_for(channel):
    return THRESHOLDS.get(channel, {"relevancy": 2})


_ids = iter(range(1, 1_000_000))


def verdict(
    score, *, judge="relevancy", status="ok", right=0, wrong=0, tokens=(100, 10), cached=False, top=4, prompt_cached=0
):
    return JudgmentRow(
        id=next(_ids),
        judge=judge,
        status=status,
        score=score if status == "ok" else None,
        max_score=top,
        normalized_score=score / top if status == "ok" and score is not None else None,
        prompt_tokens=tokens[0],
        cached_tokens=prompt_cached,
        completion_tokens=tokens[1],
        cached=cached,
        votes_right=right,
        votes_wrong=wrong,
    )


def pair(channel="C1", *, at=None, status="judged", judgments=(), source="capture", private=False, superseded=()):
    pair_id = next(_ids)
    return PairRow(
        id=pair_id,
        channel_id=channel,
        created_at=at or NOW - timedelta(days=1),
        status=status,
        source=source,
        channel_is_private=private,
        answer_ts=f"1700000000.{pair_id:06d}",
        judgments=tuple(judgments),
        superseded=tuple(superseded),
    )
