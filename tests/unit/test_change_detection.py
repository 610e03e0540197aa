"""The change detector (common.reports.change_detection): the chart's exact run length against a simulation, a
stable stream that stays quiet within its bound, a step change found within N answers, one alarm per episode, and
the re-arm once the rate is back at its baseline. Seed-fixed streams: each run is the same."""

from __future__ import annotations

import json
import random

import pytest

from common.reports.change_detection import (
    ChangeParams,
    ChangeState,
    Outcome,
    chart_for,
    feed,
    rounded_p0,
    run_length,
    weight_of,
)

PER_DAY = 30
GAP = 86_400.0 / PER_DAY
PARAMS = ChangeParams(false_alarms_per_month=0.5, min_baseline=200)


def answers(rng: random.Random, rate: float, count: int, start: int = 0) -> list[Outcome]:
    return [Outcome(rng.random() < rate, (start + i) * GAP, start + i) for i in range(count)]


def warmed(rng: random.Random, rate: float, count: int = 900) -> ChangeState:
    """A group with `count` answers of history at `rate` and no alarm in it."""
    while True:
        state = ChangeState()
        if not feed(state, answers(rng, rate, count), PARAMS):
            return state


def test_the_weight_is_reynolds_and_stoumbos_rounded():
    # p0 = 10%, p1 = 20%: γ = ln(0.9/0.8) / ln(0.2·0.9 / (0.1·0.8)) = 0.1452, 1/γ = 6.89
    assert weight_of(0.10) == 7
    assert weight_of(0.05) == 14


def test_the_exact_run_length_matches_a_simulation():
    """Brook & Evans' chain against the chart itself, run until it crosses, many times."""
    p, weight, limit = 0.1, 7, 30
    exact = run_length(p, weight, limit)
    rng = random.Random(5)
    lengths = []
    for _ in range(3000):
        chart = steps = 0
        while chart < limit:
            steps += 1
            chart = max(0, chart + (weight if rng.random() < p else 0) - 1)
        lengths.append(steps)
    simulated = sum(lengths) / len(lengths)
    assert simulated == pytest.approx(exact, rel=0.06)


def test_the_limit_is_the_smallest_that_reaches_the_target():
    chart = chart_for(0.1, 1800.0)
    assert chart.arl >= 1800
    assert run_length(0.1, chart.weight, chart.limit - 1) < 1800


def test_a_baseline_is_rounded_up_within_floor_and_ceiling():
    assert rounded_p0(0.0) == 0.01
    assert rounded_p0(0.101) == 0.105
    assert rounded_p0(0.9) == 0.45


def test_no_chart_before_the_minimum_history():
    state = ChangeState()
    steps = feed(state, [Outcome(True, i * GAP, i) for i in range(199)], PARAMS)
    assert steps == [] and state.chart == 0 and state.base_count == 199


def test_a_stable_stream_stays_within_its_false_alarm_bound():
    """Ten channel-years at 10% (30 a day): the target is 0.5 a month, so 60 expected at most; the bound is the
    brief's 1 a month (120), and the guard keeps it well under."""
    rng = random.Random(47)
    alarms = 0
    for _ in range(10):
        state = ChangeState()
        steps = feed(state, answers(rng, 0.10, 12 * 30 * PER_DAY), PARAMS)
        alarms += sum(step.alarm is not None for step in steps)
    assert alarms <= 60


def test_a_doubling_is_found_within_200_answers_and_alarms_once():
    rng = random.Random(11)
    delays = []
    for _ in range(40):
        state = warmed(rng, 0.10, 1800)
        start = state.seen
        steps = feed(state, answers(rng, 0.20, 600, start), PARAMS)
        alarms = [step.alarm for step in steps if step.alarm is not None]
        assert len(alarms) == 1, "one alarm for one change, however long it lasts"
        alarm = alarms[0]
        delays.append(alarm.at / GAP - start + 1)
        assert 0.05 <= alarm.baseline <= 0.15
        assert alarm.n >= 10 and alarm.failed / alarm.n > alarm.baseline
        assert len(alarm.examples) == 5 and len(set(alarm.examples)) == 5
        assert all(ref >= start - alarm.n for ref in alarm.examples)
    delays.sort()
    assert delays[len(delays) // 2] <= 120
    assert delays[int(0.9 * len(delays))] <= 250


def test_the_change_point_is_near_the_step():
    rng = random.Random(3)
    state = warmed(rng, 0.05)
    start = state.seen
    steps = feed(state, answers(rng, 0.40, 200, start), PARAMS)
    alarm = next(step.alarm for step in steps if step.alarm is not None)
    assert abs(alarm.since / GAP - start) <= 15
    assert alarm.rate > 0.25


def test_the_episode_re_arms_once_the_rate_is_back_and_alarms_again_on_the_next_rise():
    rng = random.Random(8)
    state = warmed(rng, 0.10)
    start = state.seen
    first = feed(state, answers(rng, 0.35, 150, start), PARAMS)
    assert [step.alarm.episode for step in first if step.alarm] == [1]
    assert state.alerted
    since = next(step.alarm.since for step in first if step.alarm)
    back = feed(state, answers(rng, 0.10, 900, start + 150), PARAMS)
    assert [(step.rearmed, step.ended) for step in back][:1] == [(True, since)]
    assert not any(step.alarm for step in back[:1])
    assert not state.alerted
    again = feed(state, answers(rng, 0.35, 300, start + 1050), PARAMS)
    assert [step.alarm.episode for step in again if step.alarm][:1] == [2]


def test_the_changed_stretch_does_not_join_the_baseline():
    rng = random.Random(2)
    state = warmed(rng, 0.10)
    before = state.base_count
    feed(state, answers(rng, 0.50, 400, state.seen), PARAMS)
    assert state.alerted
    assert state.base_count - before < 50  # only the stretches the chart came back to zero from, before the step


def test_the_state_survives_json():
    rng = random.Random(4)
    state = warmed(rng, 0.1, 400)
    copy = ChangeState.of_json(json.loads(json.dumps(state.as_json())))
    more = answers(rng, 0.3, 300, state.seen)
    assert [(s.alarm, s.rearmed) for s in feed(state, more, PARAMS)] == [
        (s.alarm, s.rearmed) for s in feed(copy, more, PARAMS)
    ]
    assert ChangeState.of_json(None) == ChangeState()
