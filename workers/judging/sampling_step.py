"""The sampling step of judging (workers.judging.run): is this answer judged, and with what probability? The rules
are workers.sampling's; this step reads the day's cap probability (once a day, shared in Redis) and the answer's
signals, and records the decision."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection

from common.runtime import Runtime
from store import sampling as store
from store.rules import EffectiveRule
from workers import sampling
from workers.pair_view import PairView

DAY_KEY = "relmon:sample:day:{day}:{cap}"
DAY_KEY_SECONDS = 3 * 86_400


def cap_probability(runtime: Runtime, cap: int, now: datetime) -> float:
    """The day's probability under a daily cap: computed by the first judging of the UTC day from the days before
    (workers.sampling.daily_probability), then the same for every worker all day (the first writer wins)."""
    day = now.astimezone(UTC).date()
    key = DAY_KEY.format(day=day.isoformat(), cap=cap)
    cached = runtime.redis.get(key)
    if cached is not None:
        return float(cached)
    (y_start, y_end), (w_start, w_end) = sampling.volume_days(day)
    with runtime.db.autocommit() as connection:
        expected = sampling.expected_volume(
            store.unsignalled_answers(connection, y_start, y_end), store.unsignalled_answers(connection, w_start, w_end)
        )
    probability = sampling.daily_probability(cap, expected)
    runtime.redis.set(key, repr(probability), nx=True, ex=DAY_KEY_SECONDS)
    return float(runtime.redis.get(key) or probability)


def rate_for(runtime: Runtime, rule: EffectiveRule, now: datetime) -> float:
    """The probability an unsignalled answer of this channel has today."""
    if rule.daily_cap is not None:
        return cap_probability(runtime, rule.daily_cap, now)
    return rule.sample_rate


def judged(runtime: Runtime, connection: Connection, pair: PairView, rule: EffectiveRule, now: datetime) -> bool:
    """Whether the pair is judged: True with its probability recorded, False with the pair marked skipped."""
    if pair.on_demand:
        return True
    rate = rate_for(runtime, rule, now)
    if rate >= 1.0:
        return True  # every answer: nothing to record (NULL is 1), the hot path as without sampling
    point = sampling.sample_point(pair.channel_id, sampling.sampled_message(pair.answer_ts, pair.id))
    # Below the day's rate, signalled or not: the uniform subsample the change and degradation alerts read.
    store.mark_uniform(connection, pair.id, sampling.chosen(point, rate))
    signalled = store.is_signalled(connection, pair.id)
    probability = sampling.inclusion_probability(rate, source=pair.source, signalled=signalled)
    if sampling.chosen(point, probability):
        store.sampled_in(connection, pair.id, probability)
        return True
    if store.sampled_out(connection, pair.id):
        return False
    # Not marked: a failure signal committed since the read above (judge it, for certain), or the pair moved on.
    return store.is_signalled(connection, pair.id)
