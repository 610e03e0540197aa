"""The hourly summary of held alerts: its content, Slack's Block Kit limits in a burst, several source channels,
privacy, and degradation alerts held with the low scores."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from common.messages import blocks as bk
from common.messages.summaries import DegradationAlert, SummaryItem, degradation_alert, summary_message
from common.reports.intervals import bootstrap_mean
from tests.message_checks import AT, PERMALINK, all_text, check_limits


def test_summary_names_the_caps_that_held_its_scores():
    own, shared = summary_items(2)
    shared = replace(shared, held_by="alert_channel_cap")
    both = all_text(summary_message(AT, [own, shared], caps={"C1": 10}, alert_channel_cap=30))
    assert "<#C1> reached its cap of 10 alerts" in both
    assert "or this channel its cap of 30 alerts from all channels" in both
    only_own = all_text(summary_message(AT, [own], caps={"C1": 10}, alert_channel_cap=30))
    assert "<#C1> reached its cap of 10 alerts" in only_own and "from all channels" not in only_own
    # C1 posted no alert of its own (degradation alerts, say, filled the alert channel): it reached no cap itself
    only_shared = all_text(summary_message(AT, [shared], caps={"C1": 10}, alert_channel_cap=30))
    assert "This channel had its cap of 30 alerts from all channels for the hour starting" in only_shared
    assert "further low scores from <#C1> are gathered here" in only_shared and "reached its cap" not in only_shared


def summary_items(
    count: int, reasoning: str = "Talks about something else.", *, channel: str = "C1", quote: bool = True
) -> list[SummaryItem]:
    return [
        SummaryItem(i, "relevancy", 0, 4, AT + timedelta(seconds=i), f"{PERMALINK}{i}", reasoning, channel, quote)
        for i in range(count)
    ]


def test_summary_lists_held_scores():
    payload = summary_message(AT, summary_items(3), caps={"C1": 10})
    check_limits(payload)
    assert payload["blocks"][0]["text"]["text"] == "3 more low scores this hour"
    text = all_text(payload)
    assert text.count("0 / 4") == 3 and "Talks about something else." in text and "cap of 10" in text


def huge_summary() -> dict:
    return summary_message(AT, summary_items(2_000, "x" * 400), caps={"C1": 10})


def test_huge_summary_stays_within_limits():
    check_limits(huge_summary())


def test_huge_summary_counts_the_items_it_leaves_out():
    payload = huge_summary()
    shown = all_text(payload).count("0 / 4")
    assert f"…and {2_000 - shown} more low scores this hour" in payload["blocks"][-1]["elements"][0]["text"]


def link_numbers(payload: dict) -> list[int]:
    """The items a summary lists, by the number its permalink ends in, in order."""
    return [int(part.split("|")[0]) for part in all_text(payload).split(PERMALINK)[1:]]


def burst_summary(quote: bool) -> dict:
    """400 scores held in one hour, with reasoning worth quoting (or withheld)."""
    items = summary_items(400, "The answer is about something else entirely. " * 5, quote=quote)
    return summary_message(AT, items, caps={"C1": 10}, alert_channel_cap=30)


@pytest.mark.parametrize("quote", [True, False])
def test_a_burst_of_held_scores_keeps_the_summary_under_slacks_total(quote):
    """400 held items once filled 50 blocks with 137k characters: Slack answered `msg_blocks_too_long` and the
    summary stopped updating in the very burst it is for."""
    payload = burst_summary(quote)
    check_limits(payload)
    assert bk.text_length(payload["blocks"]) <= bk.MAX_MESSAGE_TEXT


@pytest.mark.parametrize("quote", [True, False])
def test_a_burst_of_held_scores_shows_the_newest_first(quote):
    listed = link_numbers(burst_summary(quote))
    assert 10 < len(listed) < 400
    assert listed == list(range(399, 399 - len(listed), -1))  # the newest, newest first


@pytest.mark.parametrize("quote", [True, False])
def test_a_burst_of_held_scores_counts_what_the_summary_leaves_out(quote):
    payload = burst_summary(quote)
    assert payload["blocks"][0]["text"]["text"] == "400 more low scores this hour"
    listed = link_numbers(payload)
    closing = payload["blocks"][-1]["elements"][0]["text"]
    assert closing.startswith(f"…and {400 - len(listed)} more low scores this hour")


def test_a_summary_that_fits_lists_every_item():
    payload = summary_message(AT, summary_items(20), caps={"C1": 10})
    check_limits(payload)
    assert link_numbers(payload) == list(range(19, -1, -1))
    assert "more low score" not in payload["blocks"][-1].get("elements", [{}])[0].get("text", "")


def test_private_summary_withholds_reasoning():
    payload = summary_message(AT, summary_items(2, "secret details", quote=False), caps={"C1": 10})
    check_limits(payload)
    assert "secret details" not in all_text(payload)
    assert "withheld" in all_text(payload)


def summary_of_a_public_channel_with_a_private_one() -> dict:
    """Three scores held from a public channel (by the alert channel's cap), two from a private one."""
    public = [replace(i, held_by="alert_channel_cap") for i in summary_items(3, "public reasoning", channel="C_PUBLIC")]
    private = [
        replace(item, judgment_id=10 + item.judgment_id, permalink=f"{PERMALINK}{10 + item.judgment_id}")
        for item in summary_items(2, "secret details", channel="G_PRIVATE", quote=False)
    ]
    return summary_message(AT, public + private, caps={"C_PUBLIC": 2, "G_PRIVATE": 5}, alert_channel_cap=30)


def test_one_summary_gathers_several_source_channels():
    payload = summary_of_a_public_channel_with_a_private_one()
    check_limits(payload)
    text = all_text(payload)
    assert payload["text"] == "5 more low scores from 2 channels this hour"
    assert "<#C_PUBLIC> (3 held, cap 2)" in text and "<#G_PRIVATE> (2 held, cap 5)" in text
    assert "this channel's 30 from all channels" in text
    assert text.count("<#G_PRIVATE> · *0 / 4*") == 2 and text.count("<#C_PUBLIC> · *0 / 4*") == 3


def test_a_summary_of_several_channels_withholds_only_the_private_ones_reasoning():
    text = all_text(summary_of_a_public_channel_with_a_private_one())
    assert text.count("public reasoning") == 3 and "secret details" not in text
    assert "Reasoning withheld for scores from private channels" in text


def test_a_summary_puts_held_degradation_alerts_first():
    worse = [
        DegradationAlert("C_A", "relevancy", 0.5, 2.5, 8, AT, "minutes", 50, 60, 5),
        DegradationAlert("C_B", "relevancy", 1.25, 2.5, 50, AT, "answers", 50, 60, 5),
    ]
    only = summary_message(AT, [], caps={}, alert_channel_cap=30, degradations=worse)
    check_limits(only)
    assert only["text"] == "2 channels getting worse this hour"
    text = all_text(only)
    assert "*Getting worse* (this channel had its 30 alerts for the hour)" in text
    assert "• <#C_A>: mean relevancy *0.50* over the 8 answers judged in the last 60 minutes, below the floor" in text
    assert "• <#C_B>: mean relevancy *1.25* over the last 50 judged answers" in text
    assert "low score" not in text

    both = summary_message(AT, summary_items(3), caps={"C1": 10}, alert_channel_cap=30, degradations=worse[:1])
    check_limits(both)
    assert both["blocks"][0]["text"]["text"] == "1 channel getting worse and 3 more low scores this hour"
    assert all_text(both).index("Getting worse") < all_text(both).index("reached its cap of 10")

    many = [replace(worse[0], channel_id=f"C{n:03d}") for n in range(45)]
    crowded = summary_message(AT, summary_items(400, "x" * 300), caps={"C1": 10}, degradations=many)
    check_limits(crowded)
    assert bk.text_length(crowded["blocks"]) <= bk.MAX_MESSAGE_TEXT
    worse_section = crowded["blocks"][1]["text"]["text"]
    listed = worse_section.count("• <#C")
    assert 5 <= listed < 45 and worse_section.endswith(f"…and {45 - listed} more channels getting worse.")


def many_channels_summary() -> dict:
    """65 scores held from 64 channels, C000 holding two."""
    items = [
        replace(item, judgment_id=n, channel_id=f"C{n:03d}")
        for n, item in enumerate(summary_items(60) + summary_items(5))
    ]
    items[-1] = replace(items[-1], channel_id="C000")  # C000 holds two
    caps = {item.channel_id: 10 for item in items}
    return summary_message(AT, items, caps=caps)


def test_a_summary_of_many_channels_names_the_busiest():
    payload = many_channels_summary()
    check_limits(payload)
    assert "<#C000> (2 held, cap 10)" in payload["blocks"][1]["text"]["text"]


def test_a_summary_of_many_channels_counts_the_rest():
    intro = many_channels_summary()["blocks"][1]["text"]["text"]
    assert intro.startswith("Low scores from 64 channels went over the hourly alert caps (each channel's own) ")
    assert intro.endswith(", 44 more.")


def test_a_held_degradation_shows_its_means_interval_when_its_scores_are_known():
    scores = {0.0: 3, 1.0: 5, 2.0: 12}  # 20 answers, mean 1.45
    known = DegradationAlert("C_A", "relevancy", 1.45, 2.5, 20, AT, "answers", 20, 60, 5, scores=scores)
    interval = bootstrap_mean(scores).interval
    text = all_text(summary_message(AT, [], caps={}, alert_channel_cap=30, degradations=[known]))
    expected = f"*1.45* ({interval.low:.2f}–{interval.high:.2f}, n=20) over the last 20 judged answers"
    assert expected in text and interval.low < 1.45 < interval.high
    assert expected.split(" over")[0] in all_text(degradation_alert(known))
    few = replace(known, count=6, scores={0.0: 2, 1.0: 4}, window="minutes")
    assert "is *1.45* (n=6: too few for an interval), below the floor" in all_text(degradation_alert(few))
    # A row claimed before the scores were kept (or whose scores do not add up) shows the mean and its n alone.
    assert "is *1.45*, below the floor" in all_text(degradation_alert(replace(known, scores={})))
