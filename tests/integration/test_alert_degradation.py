"""Degradation alerts, with the Slack tasks run in-process against FakeSlack (real HTTP), real Redis and
SQLite/PostgreSQL: the count window and the time window, a channel re-armed once it recovers, per-channel rules
(window, floor, cap), and degradation alerts sharing the alert channel's cap and its summary."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from store.models import Alert, Judgment, Pair
from tests import alert_helpers
from tests.alert_helpers import ALERTS, SOURCES, SUPPORT, add_judgment, alerts, write_rules
from workers.alerts import delivery, summaries

one_hour = alert_helpers.one_hour  # autouse (tests/alert_helpers.py): the caps these tests fill count per UTC hour


def judged(runtime, score: float, times: int, **kwargs) -> None:
    """`times` answers judged `score`, each considered for alerts."""
    for _ in range(times):
        delivery.consider(runtime, add_judgment(runtime, score=score, **kwargs))


@pytest.fixture
def count_window(make_runtime):
    """The count window alone (the time window has its own tests): recovery needs every window above the floor.
    Threshold 0: the 1s below are not low-score alerts, only a falling mean."""
    with make_runtime(degradation_window=4, degradation_floor=2.5, threshold=0, degradation_window_minutes=0
                      ) as runtime:  # fmt: skip
        yield runtime


def test_degradation_alerts_when_the_full_window_falls_below_the_floor(count_window, fake):
    judged(count_window, 1, 3)
    assert fake.posted(ALERTS) == []  # fewer answers than the window
    judged(count_window, 1, 1)
    [post] = fake.posted(ALERTS)
    assert "getting worse" in post["text"] and "1.00" in json.dumps(post["blocks"])


def test_a_degraded_channel_is_not_alerted_again_while_it_stays_bad(count_window, fake):
    judged(count_window, 1, 7)
    assert len(fake.posted(ALERTS)) == 1  # still degraded: no repeat


def test_a_recovered_channel_is_rearmed(count_window):
    judged(count_window, 1, 4)
    judged(count_window, 4, 4)
    [row] = [a for a in alerts(count_window) if a.kind == "degradation"]
    assert row.details.get("recovered_at")  # re-armed


def test_a_rearmed_channel_alerts_again_only_in_a_later_hour(count_window, fake):
    runtime = count_window
    judged(runtime, 1, 4)
    judged(runtime, 4, 4)
    judged(runtime, 1, 4)
    assert len(fake.posted(ALERTS)) == 1  # re-armed, but not twice within the hour

    later = datetime.now(UTC) + timedelta(hours=2)
    delivery.consider(runtime, add_judgment(runtime, score=1, created_at=later), now=later)
    assert len(fake.posted(ALERTS)) == 2
    assert [a.dedupe_key for a in alerts(runtime) if a.kind == "degradation"] == [
        f"degr:{SUPPORT}:1",
        f"degr:{SUPPORT}:2",
    ]


def set_answered_at(runtime, judgment_id: int, at: datetime) -> None:
    """When the answer was captured (the time window reads the pair's capture time)."""
    with runtime.db.session() as session:
        pair = session.get(Pair, session.get(Judgment, judgment_id).pair_id)
        pair.created_at = at


def degradation_posts(fake, channel: str = ALERTS) -> list[dict]:
    return [p for p in fake.posted(channel) if "getting worse" in p["text"]]


def test_a_bad_last_hour_alerts_before_the_count_window_fills(make_runtime, fake):
    """Window 20, floor 2.5, the hour's window with its minimum of 5: the fifth bad answer of the hour alerts,
    though the channel has far fewer than 20 answers, and the alert says which window tripped."""
    with make_runtime(degradation_window=20, degradation_floor=2.5, threshold=0) as runtime:
        for _ in range(4):
            delivery.consider(runtime, add_judgment(runtime, score=1))
        assert degradation_posts(fake) == []  # 4 answers: below the hour's minimum sample
        assert delivery.consider(runtime, add_judgment(runtime, score=1)).degradation == "below_floor"
        [post] = degradation_posts(fake)
        text = json.dumps(post["blocks"], ensure_ascii=False)
        assert "the 5 answers judged in the last 60 minutes is *1.00*" in text
        assert "window: last 20 answers or last 60 minutes (5 answers at least)" in text and "RELMON_" not in text
        [row] = [a for a in alerts(runtime) if a.kind == "degradation"]
        assert row.details["window"] == "minutes" and row.details["count"] == 5


@pytest.mark.parametrize("minutes", [60, 0])
def test_a_quiet_channel_whose_last_answers_reach_back_days(make_runtime, fake, minutes):
    """15 good answers over five days, then 5 bad ones in the last hour: the last-20 mean (3.25) stays above the
    floor; the last hour's (1.0) does not. With the time window off, no alert."""
    now = datetime.now(UTC)
    with make_runtime(degradation_window=20, degradation_floor=2.5, threshold=0, degradation_window_minutes=minutes
                      ) as runtime:  # fmt: skip
        for i in range(15):
            judgment_id = add_judgment(runtime, score=4)
            set_answered_at(runtime, judgment_id, now - timedelta(hours=8 * (15 - i)))
            delivery.consider(runtime, judgment_id, now=now)
        for _ in range(5):
            delivery.consider(runtime, add_judgment(runtime, score=1), now=now)
        # the last 20: 15 × 4 and 5 × 1 → 3.25, healthy; the last hour: 1.0
        assert len(degradation_posts(fake)) == (1 if minutes else 0)


STRICT = "C_STRICT"


@pytest.fixture
def strict_rule(make_runtime, fake, tmp_path):
    """C_STRICT's rule: a cap of 1 alert an hour, a floor of 3.5 over its last 3 answers (no time window); the same
    three answers judged 3 in it and in the support channel (on the defaults)."""
    fake.add_channel(STRICT, "strict", members=["U_RELMON"])
    rules = write_rules(
        tmp_path,
        {
            "channels": {
                STRICT: {
                    "alert_cap_per_hour": 1,
                    "degradation_floor": 3.5,
                    "degradation_window": 3,
                    "degradation_window_minutes": 0,
                }
            }
        },
    )
    with make_runtime(channel_rules_file=rules, degradation_window_minutes=0) as runtime:
        for channel in (STRICT, SUPPORT):
            judged(runtime, 3, 3, channel_id=channel)
        yield runtime


def test_rules_file_sets_the_degradation_window_with_its_floor_per_channel(strict_rule, fake):
    # mean 3.0: below the strict channel's floor of 3.5 over its window of 3; the defaults (20, 2.5) say nothing
    [post] = degradation_posts(fake)
    assert f"<#{STRICT}>" in post["text"] and "< 3.5" in post["text"]
    assert "last 3 judged answers" in json.dumps(post["blocks"])


def test_rules_file_sets_the_alert_cap_per_channel(strict_rule, fake):
    runtime = strict_rule
    for channel in (STRICT, SUPPORT):
        judged(runtime, 0, 2, channel_id=channel)
    lows = [p for p in fake.posted(ALERTS) if p["text"].startswith("Low relevancy")]
    assert sorted(p["text"].split(" in ")[1] for p in lows) == [f"<#{STRICT}>", f"<#{SUPPORT}>", f"<#{SUPPORT}>"]
    assert [(a.source_channel_id, a.status) for a in alerts(runtime) if a.status == "held"] == [(STRICT, "held")]
    assert summaries.flush_summaries(runtime) == 1
    [summary] = [p for p in fake.posted(ALERTS) if "more low score" in p["text"]]
    assert f"<#{STRICT}> reached its cap of 1 alerts" in json.dumps(summary["blocks"])


# A bot that breaks everywhere at once: four channels getting worse, an alert channel capped at 2 an hour.
FOUR_WORSE = {
    "alert_channel_cap_per_hour": 2,
    "degradation_window": 2,
    "degradation_floor": 2.5,
    "degradation_window_minutes": 0,
    "threshold": 0,
}


def four_channels_get_worse(runtime, fake) -> list[Alert]:
    """Two answers judged 1 in each of four channels (threshold 0: not low-score alerts, only a falling mean); the
    degradation alerts."""
    for channel in SOURCES[:4]:
        fake.add_channel(channel, channel.lower(), members=["U_RELMON"])
    for channel in SOURCES[:4]:
        judged(runtime, 1, 2, channel_id=channel)
    return [a for a in alerts(runtime) if a.kind == "degradation"]


def test_degradation_alerts_share_the_alert_channel_cap(make_runtime, fake):
    """Two degradation alerts are posted, the other two held; a low score after that is held too: the cap counts
    both kinds."""
    with make_runtime(**FOUR_WORSE) as runtime:
        rows = four_channels_get_worse(runtime, fake)
        assert len(degradation_posts(fake)) == 2
        assert sorted(a.status for a in rows) == ["held", "held", "posted", "posted"]
        assert all(a.details["reason"] == "alert_channel_cap" for a in rows if a.status == "held")

    with make_runtime(**{**FOUR_WORSE, "threshold": 2}) as runtime:
        delivery.consider(runtime, add_judgment(runtime, score=0, channel_id=SOURCES[0]))
        [low] = [a for a in alerts(runtime) if a.kind == "low_score"]
        assert low.status == "held" and low.details["reason"] == "alert_channel_cap"  # 2 degradation alerts came first


def test_held_degradation_alerts_wait_at_the_top_of_the_summary(make_runtime, fake):
    """The two held wait in one summary, first news at its top."""
    with make_runtime(**FOUR_WORSE) as runtime:
        held = sorted(a.source_channel_id for a in four_channels_get_worse(runtime, fake) if a.status == "held")
        assert summaries.flush_summaries(runtime) == 1
        [summary] = [p for p in fake.posted(ALERTS) if "this hour" in p["text"]]
        assert summary["text"] == "2 channels getting worse this hour"
        blocks = json.dumps(summary["blocks"], ensure_ascii=False)
        assert "*Getting worse* (this channel had its 2 alerts for the hour)" in blocks
        assert all(
            f"• <#{channel}>: mean relevancy *1.00* (n=2: too few for an interval) over the last 2 judged answers"
            in blocks
            for channel in held
        )


def test_held_degradation_alerts_stay_episodes_while_their_channels_stay_bad(make_runtime, fake):
    """Held or posted, a channel getting worse is one episode: no repeat while it stays bad."""
    with make_runtime(**FOUR_WORSE) as runtime:
        four_channels_get_worse(runtime, fake)
        summaries.flush_summaries(runtime)  # the held ones summarised
        for channel in SOURCES[:4]:  # still bad: no channel alerts again, held or not
            delivery.consider(runtime, add_judgment(runtime, score=1, channel_id=channel))
        assert len([a for a in alerts(runtime) if a.kind == "degradation"]) == 4
