"""RELMON_SAMPLE: its parsing in the settings, and the sampling rules (workers.sampling): who is judged, with what
probability, and a daily cap's probability from the days before."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pytest
from pydantic import ValidationError

from capture.outcomes import FAILURE_SIGNALS
from store.rules import ChannelRules
from store.settings import Settings
from store.settings_sampling import SamplePlan, parse_sample
from store.signals import ALWAYS_JUDGED
from workers import sampling


@pytest.mark.parametrize(
    ("text", "plan"),
    [
        ("0.2", SamplePlan(rate=0.2)),
        ("20%", SamplePlan(rate=0.2)),
        (" 12.5 % ", SamplePlan(rate=0.125)),
        ("1", SamplePlan(rate=1.0)),
        ("0", SamplePlan(rate=0.0)),
        (".5", SamplePlan(rate=0.5)),
        ("500/day", SamplePlan(daily_cap=500)),
        ("500 / Day", SamplePlan(daily_cap=500)),
    ],
)
def test_a_sample_setting_is_a_rate_or_a_daily_cap(text, plan):
    assert parse_sample(text) == plan


@pytest.mark.parametrize("text", ["", "abc", "150%", "1.5", "-0.2", "500/week", "20%%", "0.2/day", "true"])
def test_a_bad_sample_setting_says_what_is_accepted(text):
    with pytest.raises(ValueError, match="500/day"):
        parse_sample(text)


def _settings(monkeypatch, **env) -> Settings:
    for name in ("RELMON_SAMPLE", "RELMON_SAMPLE_RATE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings(_env_file=None)


def test_the_settings_read_relmon_sample_and_its_older_name(monkeypatch):
    assert _settings(monkeypatch).sample_plan == SamplePlan(rate=1.0)
    assert _settings(monkeypatch, RELMON_SAMPLE="20%").sample_plan == SamplePlan(rate=0.2)
    assert _settings(monkeypatch, RELMON_SAMPLE="20%").sample_rate == 0.2  # the channel rules' default
    assert _settings(monkeypatch, RELMON_SAMPLE_RATE="0.3").sample_plan == SamplePlan(rate=0.3)
    capped = _settings(monkeypatch, RELMON_SAMPLE="500/day")
    assert capped.sample_plan == SamplePlan(daily_cap=500)
    assert str(capped.sample_plan) == "500/day"
    assert _settings(monkeypatch, RELMON_SAMPLE="").sample_plan == SamplePlan(rate=1.0)  # blank: unset


def test_the_settings_refuse_a_bad_or_contradictory_sample(monkeypatch):
    with pytest.raises(ValidationError, match="500/day"):
        _settings(monkeypatch, RELMON_SAMPLE="lots")
    with pytest.raises(ValidationError, match="RELMON_SAMPLE only"):
        _settings(monkeypatch, RELMON_SAMPLE="0.2", RELMON_SAMPLE_RATE="0.5")
    assert _settings(monkeypatch, RELMON_SAMPLE="0.5", RELMON_SAMPLE_RATE="0.5").sample_rate == 0.5


def test_a_channel_with_its_own_rate_is_not_under_the_cap(monkeypatch):
    settings = _settings(monkeypatch, RELMON_SAMPLE="500/day")
    rules = ChannelRules.model_validate({"channels": {"C2": {"sample_rate": 0.5}}})
    assert rules.for_channel("C1", settings).daily_cap == 500
    assert rules.for_channel("C2", settings).daily_cap is None
    assert rules.for_channel("C2", settings).sample_rate == 0.5


def test_the_always_judged_signals_are_the_outcomes_failure_signals():
    assert ALWAYS_JUDGED == FAILURE_SIGNALS


def test_signalled_and_on_demand_answers_are_certain_and_the_rest_get_the_rate():
    assert sampling.inclusion_probability(0.2, source="capture") == 0.2
    assert sampling.inclusion_probability(0.2, source="capture", signalled=True) == 1.0
    assert sampling.inclusion_probability(0.0, source="command") == 1.0
    assert sampling.chosen(0.99, 1.0) and not sampling.chosen(0.0, 0.0)


def test_the_hashed_points_judge_the_rate_and_raising_it_only_adds_answers():
    points = [sampling.sample_point("C1", f"1700000000.{i:06d}") for i in range(20_000)]
    low = {i for i, p in enumerate(points) if sampling.chosen(p, 0.2)}
    high = {i for i, p in enumerate(points) if sampling.chosen(p, 0.3)}
    assert abs(len(low) / len(points) - 0.2) < 0.01
    assert low <= high


def test_a_daily_cap_shares_itself_over_the_expected_unsignalled_answers():
    assert sampling.daily_probability(500, 2_000) == 0.25
    assert sampling.daily_probability(500, 400) == 1.0  # fewer than the cap: every one
    assert sampling.daily_probability(500, 0) == 1.0  # no history yet: every one (the daily budget bounds it)
    assert sampling.daily_probability(1, 10**9) == sampling.MIN_PROBABILITY
    assert sampling.daily_probability(0, 100) == 0.0
    assert sampling.expected_volume(1_200, 3_000) == 3_000  # the busier of yesterday and a week ago
    (y0, y1), (w0, w1) = sampling.volume_days(date(2026, 12, 7))
    assert w1 == datetime(2026, 12, 1, tzinfo=UTC)
    assert (y0, y1) == (datetime(2026, 12, 6, tzinfo=UTC), datetime(2026, 12, 7, tzinfo=UTC))
    assert w0 == datetime(2026, 11, 30, tzinfo=UTC)


def test_a_capped_week_judges_about_the_cap_a_day_and_its_weighted_count_is_unbiased():
    """Traffic that grows 5% a day, a cap of 300/day: each day judges the cap's share of yesterday's volume (so a
    little over the cap while traffic grows), and Σ 1/π over the judged answers estimates the day's volume."""
    rng = np.random.default_rng(3)
    cap, volumes = 300, [int(2_000 * 1.05**day) for day in range(8)]
    for day in range(1, 8):
        probability = sampling.daily_probability(cap, sampling.expected_volume(volumes[day - 1], 0))
        points = rng.random(volumes[day])
        judged = int(sum(sampling.chosen(p, probability) for p in points))
        assert 0.85 * cap <= judged <= 1.25 * cap
        estimated = judged / probability  # Horvitz–Thompson count of the day's answers
        assert abs(estimated - volumes[day]) < 0.2 * volumes[day]


def test_the_reports_say_how_much_was_judged_and_that_rates_are_weighted():
    from common.messages.sampling import plan_text, sampled_text

    assert sampled_text(0.2) == "judged 20% of unsignalled answers; rates are weighted"
    assert sampled_text(None) is None  # sampling off: nothing said
    assert plan_text(SamplePlan(rate=0.2)) == "20% of unsignalled answers, and every signalled one"
    assert plan_text(SamplePlan(daily_cap=500)) == "about 500 unsignalled answers a day, and every signalled one"
    assert plan_text(SamplePlan(rate=1.0)) == "100% of answers"


def test_app_homes_settings_show_the_daily_cap(monkeypatch):
    from common.messages.home import settings_fields

    settings = _settings(monkeypatch, RELMON_SAMPLE="500/day")
    fields = settings_fields(settings, ChannelRules().for_channel(None, settings))
    texts = [field["text"] for field in fields]
    assert "*Sampling*\nabout 500 unsignalled answers a day, and every signalled one" in texts
