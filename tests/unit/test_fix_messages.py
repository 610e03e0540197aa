"""How a fix's verdict reads (common.messages.fixes): each outcome with its rates, intervals and n; the answers still
needed; the test set's re-run; the digest's section, the buttons and the thread reply."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from common.messages.fixes import (
    MARK_ACTION_ID,
    MARK_BLOCK_ID,
    FixLine,
    fixes_blocks,
    mark_buttons,
    mark_message,
    verdict_line,
    verdict_reply,
)
from common.reports.fixes import GoldenRerun, verdict

MARK = datetime(2026, 11, 2, 10, tzinfo=UTC)
LATER = MARK + timedelta(days=14)


def test_an_improved_fix_reads_with_both_rates_and_the_difference() -> None:
    line = verdict_line("Refunds", verdict((30, 100), (5, 100), marked_at=MARK, now=LATER), mrkdwn=False)
    assert line == (
        "Refunds: improved · failed 30% (22–40%, n=100) before → 5% (2–11%, n=100) since; "
        "difference −25 pts (−35 to −15)"
    )


def test_each_outcome_has_its_words() -> None:
    worse = verdict_line("Refunds", verdict((10, 100), (30, 100), marked_at=MARK, now=LATER))
    assert worse.startswith("*Refunds*: :warning: worse · failed 10%") and "+20 pts" in worse
    stayed = verdict_line("Refunds", verdict((60, 200), (45, 150), marked_at=MARK, now=LATER))
    assert ":x: not improved" in stayed and "n=150" in stayed
    waiting = verdict_line("Refunds", verdict((60, 200), (3, 12), marked_at=MARK, now=LATER), mrkdwn=False)
    assert "no evidence yet" in waiting and "more answers needed" in waiting and "n=12" in waiting
    week = verdict_line("Refunds", verdict((60, 200), (45, 150), marked_at=MARK, now=MARK + timedelta(days=2)))
    assert "waits for a whole week after the mark (Mon 09 Nov)" in week
    too_few = verdict_line("Refunds", verdict((2, 5), (0, 40), marked_at=MARK, now=LATER))
    assert "too few answers before the mark to show a fall (n=5)" in too_few and "too few (n=5)" in too_few


def test_the_test_sets_re_run_is_given_beside_the_verdict() -> None:
    found = verdict((30, 100), (5, 100), marked_at=MARK, now=LATER, golden=GoldenRerun(7, 3, 4))
    assert verdict_line("Refunds", found).endswith("test set: 3 of 4 of its items pass (relmon regress run 7)")


def test_the_digest_section_lists_each_fix_and_none_shows_nothing() -> None:
    assert fixes_blocks([]) == []
    found = verdict((30, 100), (5, 100), marked_at=MARK, now=LATER)
    section, divider = fixes_blocks([FixLine("Refunds <&>", MARK, found)])
    text = section["text"]["text"]
    assert text.startswith("*Fixes*\n• *Refunds &lt;&amp;&gt;*: :white_check_mark: improved")
    assert "_(marked <!date^" in text and divider == {"type": "divider"}


def test_the_buttons_carry_each_topics_key() -> None:
    assert mark_buttons([(None, "Unnamed"), ("", "x")]) == []
    [block] = mark_buttons([("t-1", "Refunds"), (None, "Unkeyed"), ("t-2", "Invoices")])
    assert block["block_id"] == MARK_BLOCK_ID
    assert [(b["action_id"], b["value"], b["text"]["text"]) for b in block["elements"]] == [
        (f"{MARK_ACTION_ID}:1", "t-1", "Mark fixed: Refunds"),
        (f"{MARK_ACTION_ID}:3", "t-2", "Mark fixed: Invoices"),
    ]


def test_the_mark_and_its_reply() -> None:
    found = verdict((60, 200), (0, 0), marked_at=MARK, now=MARK)
    message = mark_message("Refunds", "U_LEAD", MARK, found)
    assert message["text"] == "Marked fixed: Refunds"
    assert message["blocks"][0]["text"]["text"].startswith("<@U_LEAD> marked *Refunds* fixed <!date^")
    cli = mark_message("Refunds", "cli", MARK, found)
    assert "The operator (relmon topics fixed) marked" in cli["blocks"][0]["text"]["text"]
    reply = verdict_reply("Refunds", MARK, verdict((30, 100), (5, 100), marked_at=MARK, now=LATER))
    assert reply["text"] == "Refunds: improved" and "Fix marked <!date^" in reply["blocks"][0]["text"]["text"]
