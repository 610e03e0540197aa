"""Sampling: judge only a share of the answers, and know each judged answer's chance of having been judged.

A message's place in [0, 1) comes from a hash of its channel and timestamp, so a redelivered or re-enqueued
task makes the same decision, and raising the rate only adds messages (it never swaps one sample for another).
An answer is judged when its place is below its inclusion probability:

- an on-demand request (/judge, the shortcut, the CLI), or an answer whose conversation already signalled a failure
  (store.signals.ALWAYS_JUDGED): probability 1. A signal that comes after the decision makes the answer certain then
  (store.sampling.now_certain: a skipped answer is judged, a judged one's probability becomes 1);
- the rest: the channel's rate (RELMON_SAMPLE `0.2`, the rules file's `sample_rate`), or under a daily cap
  (`500/day`) the cap's share of the day's expected unsignalled answers (`daily_probability`), fixed for the UTC day.

The probability is stored with the pair; the reports weigh each judged answer by 1/probability (docs/statistics.md).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, time, timedelta

from store.models import ON_DEMAND_SOURCES

# The smallest probability a cap sets: a day far busier than expected still has its answers represented.
MIN_PROBABILITY = 0.001


def sample_point(channel_id: str | None, answer_ts: str | None) -> float:
    """A stable number in [0, 1) for one message."""
    digest = hashlib.sha256(f"{channel_id or ''}:{answer_ts or ''}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def inclusion_probability(rate: float, *, source: str, signalled: bool = False) -> float:
    """The chance this answer has of being judged: 1 for an on-demand request or a signalled failure, else `rate`."""
    if source in ON_DEMAND_SOURCES or signalled:
        return 1.0
    return min(1.0, max(0.0, rate))


def chosen(point: float, probability: float) -> bool:
    """Whether an answer at `point` is judged at `probability` (a point is uniform on [0, 1): P(chosen) = p)."""
    return probability >= 1.0 or (probability > 0.0 and point < probability)


def is_sampled_in(channel_id: str | None, answer_ts: str | None, sample_rate: float, *, source: str) -> bool:
    """Whether this answer is judged at a rate. Someone who asked for a judgment (/judge, the shortcut, the CLI)
    gets one."""
    return chosen(sample_point(channel_id, answer_ts), inclusion_probability(sample_rate, source=source))


def sampled_message(answer_ts: str | None, pair_id: int) -> str:
    """What stands for the message in `sample_point`: its ts, or for an answer that has none (an ingested exchange
    outside Slack) its pair, so that such answers are not all one point, sampled all together or not at all."""
    return answer_ts or f"pair-{pair_id}"


def expected_volume(yesterday: int, week_ago: int) -> int:
    """The unsignalled answers a day is expected to bring: the larger of yesterday's and the same weekday's a week
    before (Monday is not judged by Sunday's quiet alone), so that a cap is overshot less often."""
    return max(yesterday, week_ago, 0)


def daily_probability(cap: int, expected: int) -> float:
    """The cap's share of the day's expected unsignalled answers: each is judged with this probability, fixed for
    the day before it starts, so every judged answer's weight is known. 1 (every answer) with no history yet (the
    daily budget, RELMON_DAILY_BUDGET, still bounds the spending); never below MIN_PROBABILITY."""
    if cap <= 0:
        return 0.0
    if expected <= cap:
        return 1.0
    return max(MIN_PROBABILITY, cap / expected)


def volume_days(day: date) -> tuple[tuple[datetime, datetime], tuple[datetime, datetime]]:
    """The UTC spans of the day before `day` and of the same weekday a week before it: what `expected_volume`
    counts."""

    def span(d: date) -> tuple[datetime, datetime]:
        start = datetime.combine(d, time(), UTC)
        return start, start + timedelta(days=1)

    return span(day - timedelta(days=1)), span(day - timedelta(days=7))
