"""Low-score and degradation alert rendering: content, cutting to Slack's Block Kit limits, privacy."""

from __future__ import annotations

import json

import pytest

from common.feedback import Tally
from common.messages import blocks as bk
from common.messages.alerts import low_score_alert
from common.messages.summaries import DegradationAlert, degradation_alert
from tests.message_checks import AT, PERMALINK, alert, all_text, check_limits


def test_low_score_alert_shows_everything_a_reader_needs():
    payload = low_score_alert(alert(votes=Tally(2, 1)))
    check_limits(payload)
    blocks = payload["blocks"]
    assert blocks[0] == {
        "type": "header",
        "text": {"type": "plain_text", "text": "Low relevancy score: 1 / 4", "emoji": True},
    }
    text = all_text(payload)
    assert "How do I reset my password?" in text
    assert "&lt;weekdays&gt; &amp; weekends" in text  # mrkdwn escaped
    assert "opening hours, not passwords" in text
    assert "<#C1>" in text and "<!date^" in text
    buttons = blocks[-2]["elements"]
    assert [b.get("action_id") for b in buttons] == ["open_message", "feedback_right", "feedback_wrong", "golden_add"]
    assert buttons[0]["url"] == PERMALINK
    assert [b["text"]["text"] for b in buttons[1:]] == ["Judge was right", "Judge was wrong", "Add to test set"]
    assert buttons[3]["value"] == buttons[1]["value"]  # the judgment: its question goes to the golden set
    assert buttons[1]["value"] == buttons[2]["value"] == "42"
    assert blocks[-1]["elements"][0]["text"] == "Feedback: 2 say the judge was right · 1 says it was wrong"
    # the notification text carries no conversation text
    assert payload["text"] == "Low relevancy score 1 / 4 in <#C1>"


def test_long_answer_is_cut_with_a_note():
    answer = "word & <tag> " * 2_000  # 26,000 characters, longer once escaped
    payload = low_score_alert(alert(answer=answer, reasoning="r" * 5_000, question="q" * 4_000))
    check_limits(payload)
    answer_block = next(b for b in payload["blocks"] if b["type"] == "section" and "*Answer*" in b["text"]["text"])
    assert "cut to fit Slack: 26,000 characters in all" in answer_block["text"]["text"]
    assert answer_block["text"]["text"].count("…") == 1
    assert len(answer_block["text"]["text"]) > 2_000  # cut near the limit, not far below it


def test_long_reasoning_is_cut_with_a_note():
    reasoning = "The answer <ignores> the question & " * 300  # 11,100 characters
    payload = low_score_alert(alert(reasoning=reasoning))
    check_limits(payload)
    block = next(b for b in payload["blocks"] if b["type"] == "section" and "*Why the judge" in b["text"]["text"])
    text = block["text"]["text"]
    assert text.endswith(f"_Reasoning cut to fit Slack: {len(reasoning.strip()):,} characters in all._")
    assert "&lt;ignores&gt;" in text and len(text) > 2_000  # escaped, and cut near the limit
    short = next(b for b in low_score_alert(alert())["blocks"] if "*Why the judge" in json.dumps(b))
    assert "cut to fit" not in short["text"]["text"] and "opening hours, not passwords." in short["text"]["text"]


def test_short_answer_is_not_marked_cut():
    payload = low_score_alert(alert())
    assert "cut to fit" not in all_text(payload)


def test_private_channel_alert_withholds_the_conversations_text():
    payload = low_score_alert(alert(quote=False))
    check_limits(payload)
    text = all_text(payload)
    assert "password" not in text and "office" not in text and "opening hours" not in text
    assert "reasoning withheld" in text.lower()
    assert PERMALINK in text  # the link still works for members
    assert "1 / 4" in text


def test_missing_permalink_drops_the_link_button():
    payload = low_score_alert(alert(permalink=None))
    check_limits(payload)
    actions = next(b for b in payload["blocks"] if b["type"] == "actions")
    assert [b["action_id"] for b in actions["elements"]] == ["feedback_right", "feedback_wrong", "golden_add"]


def test_scores_on_their_scales():
    assert bk.format_score(1, 4) == "1 / 4"
    assert bk.format_score(0, 2) == "0 / 2"
    assert bk.format_score(2.5, 5) == "2.5 / 5"
    assert bk.format_score(None, 5) == "no score"
    header = low_score_alert(alert(judge="grounded", score=2, max_score=5))["blocks"][0]["text"]["text"]
    assert header == "Low groundedness score: 2 / 5"


@pytest.mark.parametrize("length", [0, 1, 100, 2_999, 3_000, 3_001, 50_000])
def test_fit_quote_never_exceeds_its_budget(length):
    text = ("ab\n<&>" * length)[:length]
    quoted, cut = bk.fit_quote(text, 2_800)
    assert len(quoted) <= 2_800
    assert cut == (len(bk.quote(text)) > 2_800)


def test_shorten_cuts_with_an_ellipsis():
    assert bk.shorten("abc", 3) == "abc"
    assert bk.shorten("abcdef", 4) == "abc…"


def test_headers_are_cut_to_slacks_limit():
    assert len(bk.header("x" * 500)["text"]["text"]) == bk.MAX_HEADER_TEXT


def test_buttons_are_cut_to_slacks_limit():
    assert len(bk.button("y" * 200, action_id="a", value="v" * 5000)["text"]["text"]) == bk.MAX_BUTTON_TEXT


def test_degradation_alert():
    payload = degradation_alert(DegradationAlert("C1", "relevancy", 1.85, 2.5, 20, AT, "answers", 20, 60, 5))
    check_limits(payload)
    text = all_text(payload)
    assert "1.85" in text and "2.5" in text and "last 20 judged answers" in text and "<#C1>" in text
    # the values in force, not the names of the settings
    assert "RELMON_" not in text
    assert "floor 2.5 · window: last 20 answers or last 60 minutes (5 answers at least)" in text


def test_degradation_alert_says_the_time_window_tripped():
    payload = degradation_alert(DegradationAlert("C1", "relevancy", 0.25, 3, 8, AT, "minutes", 50, 30, 6))
    check_limits(payload)
    text = all_text(payload)
    assert "the mean relevancy score of the 8 answers judged in the last 30 minutes is *0.25*" in text
    assert "below the floor of *3*" in text and "last 50 answers or last 30 minutes (6 answers at least)" in text
    count_only = all_text(degradation_alert(DegradationAlert("C1", "relevancy", 1, 2.5, 20, AT, "answers", 20, 0)))
    assert "window: last 20 answers" in count_only and "minutes" not in count_only


def test_text_length_counts_every_text_in_the_blocks():
    blocks = [
        bk.header("h" * 10),
        bk.section("s" * 20),
        {"type": "section", "fields": [bk.mrkdwn("f" * 30), bk.mrkdwn("g" * 40)]},
        bk.context("c" * 50, "d" * 60),
        bk.actions(bk.button("b" * 70, action_id="a" * 200, value="v" * 900)),
        bk.divider(),
    ]
    assert bk.text_length(blocks) == 10 + 20 + 30 + 40 + 50 + 60 + 70
    assert bk.text_length(blocks[1]) == 20 and bk.text_length([]) == 0
