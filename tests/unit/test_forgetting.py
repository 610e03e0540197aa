"""Forgetting, the pure rules (capture.forgetting) and the spool's leftovers (bot.spool): what a deleted message or
an edit changes in each copy. End to end: tests/system/test_forgetting_processes.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.spool import SpoolFile
from capture.forgetting import (
    DELETED_MARK,
    REMOVED_MARK,
    plan_forget,
    plan_regress_forget,
    removal_of_deletion,
    removal_of_edit,
    removal_of_words,
    scrub,
    scrub_copies,
)
from store.forget_plan import FORGOTTEN, ForgetPlan, RegressPlan, StoredCheck, StoredJudgment, StoredPair, StoredReport

MARK = "QX7-marker-9f3e"


@pytest.fixture
def deleted_question() -> ForgetPlan:
    """The plan for deleting a question that its own pair, a follow-up's context and two judgments quote."""
    question = f"my card is 4111 1111 1111 1111 {MARK}, why declined?"
    pairs = [
        StoredPair(1, "1.0", "2.0", question_text=question, answer_text="Cards are declined when..."),
        StoredPair(2, "3.0", "4.0", question_text="and now?", context_text=f"[customer] {question}\n[bot] Cards..."),
        StoredPair(9, "8.0", "9.0", question_text="unrelated", answer_text="fine"),
    ]
    judgments = [
        StoredJudgment(10, 1, reasoning=f"The user asks about {MARK}", raw_output=f'{{"r": "{MARK}"}}'),
        StoredJudgment(11, 2, reasoning=f"Follows up on card 4111 ({MARK})", confirmation_reasoning="ok"),
        StoredJudgment(12, 9, reasoning="fine"),
    ]
    return plan_forget("1.0", removal_of_deletion([question]), pairs, judgments)


def test_a_deleted_question_is_gone_from_its_pair(deleted_question: ForgetPlan) -> None:
    assert deleted_question.pairs[1] == {"question_text": None}


def test_the_judgments_of_a_deleted_questions_pair_lose_their_words_not_their_scores(
    deleted_question: ForgetPlan,
) -> None:
    assert deleted_question.judgments[10] == {"reasoning": None, "raw_output": None}


def test_a_deleted_question_is_marked_deleted_in_a_follow_ups_context(deleted_question: ForgetPlan) -> None:
    assert deleted_question.pairs[2] == {"context_text": f"[customer] {DELETED_MARK}\n[bot] Cards..."}


def test_a_follow_ups_judgment_loses_the_deleted_questions_words(deleted_question: ForgetPlan) -> None:
    reasoning = deleted_question.judgments[11]["reasoning"]
    assert MARK not in reasoning and "4111" not in reasoning


def test_what_holds_nothing_of_the_deleted_question_is_left_unchanged(deleted_question: ForgetPlan) -> None:
    assert "confirmation_reasoning" not in deleted_question.judgments[11]
    assert 9 not in deleted_question.pairs and 12 not in deleted_question.judgments


def test_the_plan_says_what_each_pair_lost(deleted_question: ForgetPlan) -> None:
    assert deleted_question.about == {1: "question", 2: "message"}


def test_a_deleted_answer_already_judged_is_scrubbed_too() -> None:
    pairs = [StoredPair(1, "1.0", "2.0", question_text="Hi?", answer_text=f"Call {MARK}")]
    judgments = [StoredJudgment(5, 1, reasoning=f"mentions {MARK}", raw_output="{}", confirmation_reasoning="x")]
    plan = plan_forget("2.0", removal_of_deletion([f"Call {MARK}"]), pairs, judgments)
    assert plan.pairs[1] == {"answer_text": None}
    assert plan.judgments[5] == {"reasoning": None, "raw_output": None, "confirmation_reasoning": None}
    assert plan.about == {1: "answer"}


def test_an_edit_takes_out_only_the_words_it_removed() -> None:
    removal = removal_of_edit(["my card is 4111 1111 1111 1111, my name is Ana"], "my name is Ana")
    assert removal.words == {"card", "4111", "1111"}
    assert scrub("Ana's card 4111 1111 1111 1111", removal) == f"Ana's {REMOVED_MARK} {REMOVED_MARK} " + " ".join(
        [REMOVED_MARK] * 3
    )
    pairs = [StoredPair(1, "1.0", "2.0", question_text="my card is 4111 1111, my name is Ana", answer_text="ok")]
    plan = plan_forget("1.0", removal, pairs, [StoredJudgment(3, 1, reasoning="asks about card 4111")])
    assert plan.pairs[1] == {"question_text": f"my {REMOVED_MARK} is {REMOVED_MARK} {REMOVED_MARK}, my name is Ana"}
    assert plan.judgments[3] == {"reasoning": f"asks about {REMOVED_MARK} {REMOVED_MARK}"}  # scrubbed, not blanked
    assert plan.about == {1: "edit"}


def test_an_edit_that_only_adds_removes_nothing() -> None:
    assert not removal_of_edit(["Looking into it. Hel"], "Looking into it. Hello, open Settings.")


def test_noted_words_are_words() -> None:
    assert removal_of_words(["4111", "card"]).words == {"4111", "card"}
    assert not plan_forget("1.0", removal_of_words([]), [StoredPair(1, "1.0", "2.0", question_text="x")], [])


def test_other_copies_lose_only_the_names_or_numbers_of_a_deleted_message() -> None:
    removal = removal_of_deletion(["How do I reset the password for Zanzibar, order 5531?"])
    assert scrub("To reset the password of Zanzibar's order 5531", removal) == (
        f"To reset the password of {DELETED_MARK}'s order {DELETED_MARK}"
    )


def test_the_spool_leaves_no_text_on_disk_once_drained(tmp_path: Path) -> None:
    """A spooled event's text is gone from the SQLite file and its write-ahead log after the drain, while the bot
    still has the spool open (closing the last connection would checkpoint the log anyway)."""
    spool = SpoolFile(tmp_path / "bot-1.sqlite3")
    for i in range(3):
        spool.add({"body": {"event": {"text": f"{MARK} card 4111 1111 1111 1111 #{i}"}}, "own": {}})
    handed: list[dict] = []
    assert spool.drain(handed.append) == 3 and len(handed) == 3
    try:
        for path in tmp_path.iterdir():
            assert MARK.encode() not in path.read_bytes(), path.name
    finally:
        spool.close()


@pytest.fixture
def scrubbed_copies() -> dict:
    """What scrub_copies writes for copies outside the thread: one quotes the deleted text, one shares a word of
    it, one holds neither."""
    removal = removal_of_deletion(["Order QX4471 never came"])
    copies = {
        ("item", 1): {"context": "[customer] Order QX4471 never came", "question": "And the refund?"},
        ("topic", "t1"): {"name": "QX4471 orders"},
        ("topic", "t2"): {"name": "Refunds", "topic": None},
    }
    return scrub_copies(copies, removal)


def test_a_copy_outside_the_thread_loses_the_deleted_text(scrubbed_copies: dict) -> None:
    assert scrubbed_copies[("item", 1)]["context"] == f"[customer] {DELETED_MARK}"


def test_a_copy_outside_the_thread_loses_the_deleted_messages_words(scrubbed_copies: dict) -> None:
    assert scrubbed_copies[("topic", "t1")] == {"name": f"{DELETED_MARK} orders"}


def test_only_the_copies_fields_that_change_are_written(scrubbed_copies: dict) -> None:
    assert {key: set(fields) for key, fields in scrubbed_copies.items()} == {
        ("item", 1): {"context"},
        ("topic", "t1"): {"name"},
    }


@pytest.fixture
def regress_plan() -> RegressPlan:
    """A deleted question that golden item 1 was taken from (its own question) and item 2's context quotes (an
    earlier turn), judged in two `relmon regress` runs; item 3 holds nothing of it."""
    question = f"Why was card 4111 {MARK} declined?"
    verdict = {
        "status": "ok",
        "score": 0,
        "reasoning": f"The user asks: {question}",
        "raw_output": f'{{"q": "{MARK}"}}',
    }
    checks = [
        StoredCheck(1, "1", verdict),
        StoredCheck(2, "1", {"status": "error", "error": f"unparseable reply: {MARK}", "raw_output": MARK}),
        StoredCheck(3, "2", {**verdict, "reasoning": f"Earlier: {question} Then: and the fee?"}),
        StoredCheck(4, "3", {"status": "ok", "score": 4, "reasoning": "fine", "raw_output": "{}"}),
        StoredCheck(5, "2", None),  # charged, not yet answered
    ]
    lines = [{"id": "1", "question": question, "outcome": "fail"}, {"id": "2", "question": "And the fee?"},
             {"id": "3", "question": f"Unrelated, but names {MARK}"}]  # fmt: skip
    reports = [StoredReport(10, {"run_id": 10, "items": lines}), StoredReport(11, {"items": lines[1:2]})]
    return plan_regress_forget(removal_of_deletion([question]), {"1"}, checks, reports)


def test_the_regress_checks_of_a_deleted_questions_item_lose_their_words_not_their_scores(
    regress_plan: RegressPlan,
) -> None:
    assert regress_plan.checks[1] == {"status": "ok", "score": 0, "reasoning": None, "raw_output": None,
                                      "error": None, FORGOTTEN: True}  # fmt: skip
    assert regress_plan.checks[2]["error"] is None and regress_plan.checks[2]["status"] == "error"


def test_the_regress_checks_of_an_item_quoting_the_deleted_question_lose_its_text(regress_plan: RegressPlan) -> None:
    assert regress_plan.checks[3]["reasoning"] == f"Earlier: {DELETED_MARK} Then: and the fee?"
    assert MARK not in regress_plan.checks[3]["raw_output"] and FORGOTTEN not in regress_plan.checks[3]


def test_a_regress_report_shows_the_mark_for_a_deleted_question(regress_plan: RegressPlan) -> None:
    lines = regress_plan.reports[10]["items"]
    assert lines[0] == {"id": "1", "question": DELETED_MARK, "outcome": "fail"}
    assert lines[2]["question"] == f"Unrelated, but names {DELETED_MARK}-marker-{DELETED_MARK}"  # its words go too
    assert regress_plan.reports[10]["run_id"] == 10


def test_regress_rows_holding_nothing_of_the_message_are_left_unchanged(regress_plan: RegressPlan) -> None:
    assert set(regress_plan.checks) == {1, 2, 3} and set(regress_plan.reports) == {10}


def test_an_edit_scrubs_the_regress_rows_of_even_its_own_item() -> None:
    checks = [StoredCheck(1, "1", {"status": "ok", "reasoning": "card 4111 declined", "raw_output": "4111"})]
    plan = plan_regress_forget(removal_of_words(["4111"]), {"1"}, checks, [])
    assert plan.checks[1] == {"status": "ok", "reasoning": f"card {REMOVED_MARK} declined", "raw_output": REMOVED_MARK}
