"""The pure rules of judging what the customer finally read: how earlier turns are picked and formatted for the
judge (the cached prefix untouched), and how an alert shows a newer verdict and the earlier turns. Which edits
re-open an answer is tested through the capture's upsert: tests/integration/test_rejudge.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from capture.conversation import earlier_turns
from capture.pairing import Author, LoggedMessage
from common.messages.alerts import LowScoreAlert, Revision, low_score_alert
from judges import get_judge
from judges.context import MAX_TURN_CHARS, Turn, format_turns, parse_turns, with_context

# Formatting the earlier turns ------------------------------------------------------------------------------

TURNS = [
    Turn("customer", "How do I export my data?"),
    Turn("bot", "Use Settings > Export."),
    Turn("customer", "It is greyed out."),
    Turn("bot", "Ask an admin to enable exports."),
]


def test_the_last_turns_oldest_first_one_line_each() -> None:
    assert format_turns(TURNS, 3) == (
        "[bot] Use Settings > Export.\n[customer] It is greyed out.\n[bot] Ask an admin to enable exports."
    )
    assert format_turns([Turn("customer", "two\n\nlines   here")], 3) == "[customer] two lines here"


def test_zero_turns_or_nothing_said_gives_no_context() -> None:
    assert format_turns(TURNS, 0) == ""
    assert format_turns([Turn("bot", "   ")], 3) == ""


def test_the_oldest_turns_are_dropped_to_fit_the_bound() -> None:
    text = format_turns(TURNS, 4, max_chars=80)
    assert len(text) <= 80
    assert text.endswith("[bot] Ask an admin to enable exports.")
    assert "How do I export" not in text


def test_a_long_turn_is_cut_not_dropped() -> None:
    [line] = format_turns([Turn("bot", "x" * 5_000)], 3).splitlines()
    assert len(line) == len("[bot] ") + MAX_TURN_CHARS and line.endswith("…")


def test_the_question_is_labelled_after_the_turns() -> None:
    assert with_context("And on Android?", None) == "And on Android?"
    assert with_context("And on Android?", "") == "And on Android?"
    assert with_context("And on Android?", "[customer] How?\n[bot] Like so.") == (
        "Earlier in this conversation:\n[customer] How?\n[bot] Like so.\n\nQuestion: And on Android?"
    )


def test_the_context_goes_into_the_variable_part_only() -> None:
    """The system message and the seed's text before its placeholders are the same with and without turns."""
    judge = get_judge("relevancy")
    plain = judge.messages("And on Android?", "Tap Export.", None, 100_000)
    with_turns = judge.messages(with_context("And on Android?", "[customer] How?"), "Tap Export.", None, 100_000)
    assert plain[0] == with_turns[0]
    seed = judge.template.text
    prefix = seed[: seed.index("{")]
    assert plain[1]["content"].startswith(prefix) and with_turns[1]["content"].startswith(prefix)
    assert "Earlier in this conversation:\n[customer] How?" in with_turns[1]["content"]
    assert judge.cache_key("m", "q", "a", None) != judge.cache_key("m", with_context("q", "[bot] x"), "a", None)


def test_context_files_as_lines_or_json_lines() -> None:
    text = "customer: How do I export?\n\nBot: Use Settings.\n"
    assert parse_turns(text) == [Turn("customer", "How do I export?"), Turn("bot", "Use Settings.")]
    jsonl = "\n".join(
        json.dumps(item)
        for item in ({"speaker": "customer", "text": "Hi"}, {"role": "assistant", "content": "Hello: how?"})
    )
    assert parse_turns(jsonl) == [Turn("customer", "Hi"), Turn("bot", "Hello: how?")]
    with pytest.raises(ValueError, match="line 2"):
        parse_turns("customer: ok\nsomeone: no")
    with pytest.raises(ValueError, match="line 1"):
        parse_turns('{"speaker": "judge", "text": "x"}')


# Picking the earlier turns from the conversation log -------------------------------------------------------


def _message(ts: str, author: Author, text: str, thread_ts: str | None = "100.0", **fields) -> LoggedMessage:
    return LoggedMessage(ts=ts, thread_ts=thread_ts, author=author, content={"text": text}, **fields)


def test_the_turns_before_the_question_in_its_thread() -> None:
    root = _message("100.0", Author.HUMAN, "How do I export?")
    answer = _message("101.0", Author.MONITORED_BOT, "Settings.")
    other_bot = _message("101.5", Author.OTHER, "")
    gone = _message("101.7", Author.HUMAN, "oops", deleted=True)
    question = _message("102.0", Author.HUMAN, "And on Android?")
    later = _message("103.0", Author.MONITORED_BOT, "Menu.")
    elsewhere = _message("99.0", Author.HUMAN, "another conversation", thread_ts=None)
    messages = [elsewhere, root, answer, other_bot, gone, question, later]
    assert [(speaker, m.ts) for speaker, m in earlier_turns(question, messages)] == [
        ("customer", "100.0"),
        ("bot", "101.0"),
    ]
    assert earlier_turns(root, messages) == []  # the thread's first question
    top = _message("200.0", Author.HUMAN, "a top-level question", thread_ts=None)
    assert earlier_turns(top, [elsewhere, top]) == []


# Alerts -----------------------------------------------------------------------------------------------------


def _alert(**changes) -> LowScoreAlert:
    values = {
        "judgment_id": 7,
        "judge": "relevancy",
        "score": 0.0,
        "max_score": 4.0,
        "threshold": 1.0,
        "channel_id": "C1",
        "answered_at": datetime(2026, 11, 27, 14, 5, tzinfo=UTC),
        "quote": True,
        "question": "And on Android?",
        "answer": "Our cafeteria is nice.",
        "reasoning": "Off topic.",
    }
    return LowScoreAlert(**(values | changes))


def test_an_alert_on_an_edited_answer_says_so_with_the_newer_verdict() -> None:
    blocks = json.dumps(low_score_alert(_alert(revision=Revision("ok", 4.0, 4.0, "Now on topic.")))["blocks"])
    assert "The answer changed after this alert" in blocks and "4 / 4" in blocks and "Now on topic." in blocks
    private = json.dumps(low_score_alert(_alert(quote=False, revision=Revision("ok", 4.0, 4.0, "secret")))["blocks"])
    assert "4 / 4" in private and "secret" not in private
    failed = json.dumps(low_score_alert(_alert(revision=Revision("error", None, 4.0)))["blocks"])
    assert "could not be scored (error)" in failed


LONG_CONTEXT = "[customer] How do I export?\n[bot] " + "Use Settings. " * 100


def test_an_alert_shows_the_earlier_turns_collapsed() -> None:
    blocks = low_score_alert(_alert(context=LONG_CONTEXT))["blocks"]
    [turns] = [b for b in blocks if b["type"] == "context" and "Earlier in this conversation" in json.dumps(b)]
    text = turns["elements"][0]["text"]
    assert "[customer] How do I export?" in text and len(text) < 400


def test_an_alert_withholds_the_earlier_turns_where_it_may_not_quote() -> None:
    withheld = json.dumps(low_score_alert(_alert(context=LONG_CONTEXT, quote=False))["blocks"])
    assert "How do I export" not in withheld
