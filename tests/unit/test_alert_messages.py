"""Alert, summary and verdict rendering: content, Slack's Block Kit limits, cutting, privacy."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from common.feedback import Tally
from common.messages import blocks as bk
from common.messages.alerts import (
    DegradationAlert,
    LowScoreAlert,
    SummaryItem,
    degradation_alert,
    low_score_alert,
    summary_message,
)
from common.messages.verdicts import (
    ERRORS,
    StatsRow,
    VerdictItem,
    error_message,
    help_message,
    judge_modal,
    stats_message,
    verdict_message,
)

AT = datetime(2026, 11, 27, 14, 5, tzinfo=UTC)
PERMALINK = "https://example.slack.com/archives/C1/p1764252300000100"


def alert(**changes) -> LowScoreAlert:
    values = {
        "judgment_id": 42,
        "judge": "relevancy",
        "score": 1.0,
        "max_score": 4.0,
        "threshold": 2,
        "channel_id": "C1",
        "answered_at": AT,
        "quote": True,
        "question": "How do I reset my password?",
        "answer": "Our office is open 9 to 5 <weekdays> & weekends.",
        "reasoning": "The answer talks about opening hours, not passwords.",
        "permalink": PERMALINK,
    }
    values.update(changes)
    return LowScoreAlert(**values)


def all_text(payload: dict) -> str:
    return json.dumps(payload, ensure_ascii=False)


def check_limits(payload: dict, max_blocks: int = bk.MAX_BLOCKS) -> None:
    """Every Block Kit limit from NOTES.md that these messages can reach."""
    assert payload["text"] and len(payload["text"]) <= bk.MAX_FALLBACK_TEXT
    assert len(payload["blocks"]) <= max_blocks
    for block in payload["blocks"]:
        if block.get("block_id"):
            assert len(block["block_id"]) <= bk.MAX_ID
        if block["type"] == "header":
            assert block["text"]["type"] == "plain_text" and len(block["text"]["text"]) <= bk.MAX_HEADER_TEXT
        if block["type"] == "section":
            if "text" in block:
                assert 0 < len(block["text"]["text"]) <= bk.MAX_SECTION_TEXT
            for field in block.get("fields", []):
                assert len(field["text"]) <= bk.MAX_FIELD_TEXT
        if block["type"] == "context":
            assert len(block["elements"]) <= bk.MAX_CONTEXT_ELEMENTS
        if block["type"] == "actions":
            assert len(block["elements"]) <= bk.MAX_ACTION_ELEMENTS
            for element in block["elements"]:
                assert len(element["text"]["text"]) <= bk.MAX_BUTTON_TEXT
                assert len(element.get("value", "")) <= bk.MAX_BUTTON_VALUE
                assert len(element["action_id"]) <= bk.MAX_ID
                assert len(element.get("url", "")) <= bk.MAX_URL
    # Slack refuses more text than about 12,000 characters in all (`msg_blocks_too_long`).
    assert bk.text_length(payload["blocks"]) <= bk.MAX_MESSAGE_TEXT


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


def test_verdict_message_quotes_back_to_the_asker():
    items = [
        VerdictItem("relevancy", "ok", 1, 4, "Off topic."),
        VerdictItem("grounded", "null", None, 5, "No document."),
        VerdictItem("correctness", "error", None, 2, None),
    ]
    payload = verdict_message(items, question="Q?", answer="A" * 10_000, channel_id="C1")
    check_limits(payload)
    text = all_text(payload)
    assert payload["blocks"][0]["text"]["text"] == "Verdict: Relevancy 1 / 4"
    assert "Off topic." in text and "no score" in text and "not judged" in text and "cut to fit" in text


def test_verdict_without_judgments_explains():
    assert verdict_message([], question="q", answer="a")["text"] == ERRORS["not_judged"]
    assert verdict_message([], question="q", answer="a", budget_spent=True)["text"] == ERRORS["budget"]


def test_errors_are_one_short_sentence():
    # Each is "what happened: what to do", the second half starting with an imperative (after "please").
    actions = {"add", "ask", "check", "invite", "join", "paste", "pick", "run", "try", "use"}
    for code, sentence in ERRORS.items():
        assert len(sentence) <= 130, code
        assert sentence.count(". ") == 0 and sentence.endswith("."), code  # one sentence
        assert error_message(code)["text"] == sentence
        happened, _, to_do = sentence.partition(": ")
        assert happened and to_do, f"{code}: says what happened, then what to do"
        assert to_do.removeprefix("please ").split()[0] in actions, f"{code}: {to_do!r} names no action"


def test_stats_message():
    rows = [StatsRow("relevancy", 40, 3.125, 6, 2, 4, errors=1), StatsRow("correctness", 0, None, 0, 0, 2)]
    payload = stats_message("C1", rows)
    check_limits(payload)
    text = all_text(payload)
    assert "40 answers judged" in text and "3.12 / 4" in text and "15% at or below 2" in text
    assert "1 could not be judged" in text and "Correctness" not in text
    assert "No answers judged" in stats_message("C1", [StatsRow("relevancy", 0, None, 0, 2, 4)])["text"]


def test_help_message():
    assert "/judge stats" in help_message()["blocks"][0]["text"]["text"]


def test_judge_modal():
    modal = judge_modal({"response_url": "https://x", "channel_id": "C1"})
    check_limits({"text": "modal", "blocks": modal["blocks"]}, max_blocks=100)
    assert modal["callback_id"] == "judge_modal"
    assert [b["block_id"] for b in modal["blocks"]] == ["question", "answer", "reference", "judge"]
    assert len(modal["title"]["text"]) <= 24
    assert json.loads(modal["private_metadata"])["channel_id"] == "C1"


# Quoted text never notifies -------------------------------------------------------------------------------------

PINGS = "Hey <!here> and <!channel>, <!everyone>, <!subteam^S123> <!subteam^S123|@team> @here @channel @Everyone"


def assert_notifies_nobody(rendered: str) -> None:
    """No raw `<!…>` special and no bare broadcast word: Slack resolves neither once escaped like this."""
    assert "<!" not in rendered.replace("<!date^", "")  # relmon's own dates are the only specials
    assert not re.search(r"(?<![\w@])@(here|channel|everyone)\b", rendered, re.IGNORECASE), rendered
    assert f"@{bk.ZERO_WIDTH_SPACE}here" in rendered


ESCAPED = PINGS + " a & b <@U123> mail@here.com @heresy"


def test_escape_neutralises_broadcasts():
    escaped = bk.escape(ESCAPED)
    assert_notifies_nobody(escaped)
    assert "&lt;!here&gt;" in escaped and "&lt;!subteam^S123|@team&gt;" in escaped
    assert "mail@here.com" in escaped and "@heresy" in escaped  # not broadcast words: left as written


def test_escape_keeps_mrkdwn_escaping():
    assert "a &amp; b &lt;@U123&gt;" in bk.escape(ESCAPED)


def test_alerts_quote_mentions_without_pinging():
    pings = alert(question=PINGS, answer=PINGS, reasoning=PINGS)
    assert_notifies_nobody(all_text(low_score_alert(pings)))


def test_summaries_quote_mentions_without_pinging():
    item = SummaryItem(
        judgment_id=1, judge="relevancy", score=1.0, max_score=4.0, channel_id="C1", answered_at=AT,
        permalink=PERMALINK, reasoning=PINGS,
    )  # fmt: skip
    assert_notifies_nobody(all_text(summary_message(AT, [item], caps={"C1": 5})))


def test_verdicts_quote_mentions_without_pinging():
    verdict = verdict_message(
        [VerdictItem("relevancy", "ok", 1.0, 4.0, PINGS)], question=PINGS, answer=PINGS, channel_id="C1"
    )
    assert_notifies_nobody(all_text(verdict))
