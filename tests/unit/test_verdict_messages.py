"""The command's messages: verdict rendering, error sentences, channel stats, help and the /judge modal, within
Slack's Block Kit limits."""

from __future__ import annotations

import json

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
from common.reports.intervals import bootstrap_mean
from tests.message_checks import all_text, check_limits


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
    scores = {0: 1, 1: 2, 2: 3, 3: 9, 4: 25}  # 40 answers, mean 3.375, 6 at or below 2
    relevancy = StatsRow("relevancy", 40, 3.375, 6, 2, 4, errors=1, distribution=scores)
    payload = stats_message("C1", [relevancy, StatsRow("correctness", 0, None, 0, 0, 2)])
    check_limits(payload)
    text = all_text(payload)
    assert "40 answers judged" in text and "15% at or below 2 (7–29%, n=40)" in text
    low, high = bootstrap_mean(scores).interval.low, bootstrap_mean(scores).interval.high
    assert f"mean 3.38 / 4 ({low:.2f}–{high:.2f}, n=40)" in text and 3.0 < low < 3.375 < high < 3.7
    assert "1 could not be judged" in text and "Correctness" not in text
    assert "No answers judged" in stats_message("C1", [StatsRow("relevancy", 0, None, 0, 2, 4)])["text"]
    few = all_text(stats_message("C1", [StatsRow("relevancy", 4, 2.5, 1, 2, 4, distribution={2: 2, 3: 2})]))
    assert "mean too few (n=4) · at or below 2: too few (n=4)" in few
    unknown = all_text(stats_message("C1", [StatsRow("relevancy", 40, 3.125, 6, 2, 4)]))
    assert "mean 3.12 / 4 (n=40)" in unknown


def test_help_message():
    assert "/judge stats" in help_message()["blocks"][0]["text"]["text"]


def test_judge_modal():
    modal = judge_modal({"response_url": "https://x", "channel_id": "C1"})
    check_limits({"text": "modal", "blocks": modal["blocks"]}, max_blocks=100)
    assert modal["callback_id"] == "judge_modal"
    assert [b["block_id"] for b in modal["blocks"]] == ["question", "answer", "reference", "judge"]
    assert len(modal["title"]["text"]) <= 24
    assert json.loads(modal["private_metadata"])["channel_id"] == "C1"
