"""The LLM outage's pure rules (workers.judging.outage, workers.outage_notices): how a failure is named, the
notices' texts, when to probe, and how fast the waiting answers are released."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import openai

from judges import TransientLLMError
from workers.judging.outage import (
    Outage,
    after_failed_probe,
    answered_at_score,
    declared,
    failure_of,
    paused_text,
    probe_delay,
    probe_due,
    release_plan,
    resumed_text,
    tick_interval,
)

AT_1402 = datetime(2026, 12, 7, 14, 2, tzinfo=UTC).timestamp()


def _timeout() -> TransientLLMError:
    error = TransientLLMError("the LLM endpoint http://x did not answer in time (timeout)")
    error.__cause__ = openai.APITimeoutError(request=httpx.Request("POST", "http://x"))
    return error


def test_a_failure_is_named_by_its_status_or_what_happened() -> None:
    assert failure_of(TransientLLMError("failed (503)", status_code=503)) == "503"
    assert failure_of(TransientLLMError("rate-limited (429)", status_code=429)) == "429"
    assert failure_of(_timeout()) == "timeout"
    assert failure_of(TransientLLMError("cannot connect to the LLM endpoint http://x: refused")) == "connection"


def test_the_notices_say_what_happens_in_a_sentence_or_two() -> None:
    down = Outage(since=AT_1402, failure="503")
    assert paused_text(down) == (
        ":double_vertical_bar: Judging paused since 14:02 UTC: the LLM endpoint answers 503. "
        "Answers wait and are judged when it is back."
    )
    assert "does not answer in time" in paused_text(Outage(AT_1402, "timeout"))
    assert "cannot be reached" in paused_text(Outage(AT_1402, "connection"))
    back = resumed_text(AT_1402, AT_1402 + 29 * 60, 12, 60)
    assert back == (
        ":arrow_forward: Judging resumed at 14:31 UTC: the LLM endpoint answers again after 29 min. "
        "12 answers waited; they are judged now, oldest first (up to 60 a minute)."
    )
    assert "1 answer waited" in resumed_text(AT_1402, AT_1402 + 10, 1, 60)
    assert "waited" not in resumed_text(AT_1402, AT_1402 + 10, 0, 60)


def test_an_outage_starts_when_the_first_call_failed_and_probes_after_the_probe_wait() -> None:
    error = TransientLLMError("failed (503)", status_code=503)
    down = declared(AT_1402, error, now=AT_1402 + 120, probe_seconds=30)
    assert (down.since, down.failure, down.probes, down.next_probe_at) == (AT_1402, "503", 0, AT_1402 + 150)
    assert declared(None, error, now=AT_1402, probe_seconds=30).since == AT_1402
    assert declared(AT_1402 + 5, error, now=AT_1402, probe_seconds=30).since == AT_1402  # never in the future
    assert not probe_due(down, AT_1402 + 149) and probe_due(down, AT_1402 + 150)


def test_probes_back_off_up_to_five_minutes() -> None:
    assert [probe_delay(n, 30) for n in range(6)] == [30, 60, 120, 240, 300, 300]
    assert probe_delay(3, 600) == 600  # a probe wait longer than the cap is kept
    down = Outage(AT_1402, "503", probes=0, next_probe_at=AT_1402 + 30)
    later = after_failed_probe(down, _timeout(), now=AT_1402 + 30, probe_seconds=30)
    assert (later.probes, later.failure, later.next_probe_at, later.since) == (1, "timeout", AT_1402 + 90, AT_1402)


def test_the_backlog_is_released_at_the_rate_never_in_a_burst() -> None:
    now = 1000.0
    count, mark = release_plan(60, None, now, backlog=500, burst_seconds=10)
    assert count == 1  # the first release: one at once
    released, t = count, now
    while t < now + 60:  # a tick every 10 s for a minute: 60 a minute, whatever the backlog
        t += 10
        count, mark = release_plan(60, mark, t, backlog=500 - released, burst_seconds=10)
        assert count <= 10
        released += count
    assert 60 <= released <= 61
    # After a long pause (beat stopped for an hour), the unused credit is not kept: one burst at most.
    count, _ = release_plan(60, mark, t + 3600, backlog=500, burst_seconds=10)
    assert count == 10
    # A slow rate releases one every few ticks, not one a tick.
    counts = []
    mark = None
    for second in range(0, 60, 5):
        count, mark = release_plan(6, mark, now + second, backlog=100, burst_seconds=5)
        counts.append(count)
    assert sum(counts) == 6
    assert release_plan(60, 0.0, now, backlog=3, burst_seconds=10)[0] == 3  # never more than wait


def test_the_tick_runs_often_enough_to_probe_on_time() -> None:
    assert tick_interval(30) == 10 and tick_interval(2) == 2 and tick_interval(0.2) == 1


def test_waiting_answers_are_ordered_by_when_they_were_posted() -> None:
    assert answered_at_score("1700000000.000100", 5.0) == 1700000000.0001
    assert answered_at_score(None, 5.0) == 5.0 and answered_at_score("x", 5.0) == 5.0


def test_the_sweeps_leave_waiting_pairs_to_the_outage_tick() -> None:
    from workers.sweeps import Waiting, not_waiting_for_llm

    pairs = [Waiting(1, "pending", 1), Waiting(2, "pending", 1), Waiting(3, "settling", 1)]
    assert not_waiting_for_llm(pairs, {2}) == [pairs[0], pairs[2]]


def test_every_alert_channel_hears_an_outage_notice_once() -> None:
    from store.rules import ChannelRule, ChannelRules
    from tests.builders import make_settings
    from workers.outage_notices import alert_channels

    settings = make_settings(alert_channel="C_ALERTS")
    rules = ChannelRules(
        channels={"C_A": ChannelRule(alert_channel="C_OTHER"), "C_B": ChannelRule(alert_channel="C_ALERTS")}
    )
    assert alert_channels(rules, settings) == ["C_ALERTS", "C_OTHER"]
    assert alert_channels(ChannelRules(), make_settings(alert_channel=None)) == []
