"""The golden set's rules: duplicates, who joins, who may see or change, what a deletion leaves; the modal shows a
private channel's text only when allowed."""

from __future__ import annotations

from dataclasses import replace

from common.golden_access import WITHHELD_HERE, WITHHELD_NOT_MEMBER
from common.messages.golden import EXPECTED_BLOCK, golden_modal
from store.golden_rules import (
    ORIGIN_IMPORT,
    ORIGIN_TAKEOVER,
    Occurrence,
    after_deletion,
    dedupe_key,
    joins_from_takeover,
    joins_from_vote,
    keeps_without_sources,
    may_change_item,
    may_join,
    normalized_question,
    occurrence_of_pair,
    split_links,
    visible_to,
)


def test_the_same_question_written_differently_is_one_question() -> None:
    assert normalized_question("How do I reset my  password?") == normalized_question("how do I reset my password")
    assert normalized_question("Can’t log in!") == normalized_question("can't log in")
    a = dedupe_key("How do I reset my password?", channel_id="C1", private=False)
    assert a == dedupe_key("how do i reset my password", channel_id="C2", private=False)
    assert a != dedupe_key("How do I reset my email?", channel_id="C1", private=False)


def test_a_private_channels_question_is_its_channels_own_item() -> None:
    public = dedupe_key("Where is the VPN guide?", channel_id="G1", private=False)
    g1 = dedupe_key("Where is the VPN guide?", channel_id="G1", private=True)
    g2 = dedupe_key("Where is the VPN guide?", channel_id="G2", private=True)
    assert len({public, g1, g2}) == 3


def test_who_joins() -> None:
    assert joins_from_takeover({"reask", "human_takeover"}, "Settings > Keys.")
    assert not joins_from_takeover({"human_takeover"}, "   ")
    assert not joins_from_takeover({"reask"}, "Settings > Keys.")
    assert joins_from_vote("right", "low_score")
    assert not joins_from_vote("wrong", "low_score")
    assert not joins_from_vote("right", "degradation")
    assert not joins_from_vote("right", None)
    assert may_join("How?") and not may_join("  ?! ") and not may_join(None)


def test_private_items_are_exported_only_for_their_members() -> None:
    assert visible_to(False, "C1", set())
    assert visible_to(True, "G1", None)  # the admin's --include-private
    assert visible_to(True, "G1", {"G1"})
    assert not visible_to(True, "G1", {"G2"})
    assert not visible_to(True, None, {"G2"})


def test_a_private_channels_item_is_changed_by_its_members_or_its_alert_channels() -> None:
    assert may_change_item(False, member_of_channel=False, member_of_alert_channel=False)  # public: anyone
    assert may_change_item(True, member_of_channel=True, member_of_alert_channel=False)
    assert may_change_item(True, member_of_channel=False, member_of_alert_channel=True)
    assert not may_change_item(True, member_of_channel=False, member_of_alert_channel=False)


def test_the_modal_quotes_nothing_it_may_not_and_says_why() -> None:
    question, expected = "Where is the <@U1> vault key?", "In ops/acme."
    shown = golden_modal(7, question=question, expected=expected, in_set=True, withheld=None, times=2)
    field = next(block for block in shown["blocks"] if block.get("block_id") == EXPECTED_BLOCK)
    assert field["element"]["initial_value"] == expected
    [asked] = [b for b in shown["blocks"] if b["type"] == "section" and b["text"]["type"] == "plain_text"]
    assert asked["text"]["text"] == f"Question: {question}"  # plain text: no mention, link or markup resolved
    for reason, says in ((WITHHELD_NOT_MEMBER, "You are not a member of <#G1>"), (WITHHELD_HERE, "not quoted here")):
        hidden = golden_modal(
            7, question=question, expected=expected, in_set=True, withheld=reason, source_channel="G1"
        )
        text = str(hidden)
        assert "vault" not in text and "ops/acme" not in text and "initial_value" not in text
        assert says in text and "Leave the field empty to keep" in text
    hostile = golden_modal(7, question="Q\x00\x1b[31m red\uffff ]]> [/]", expected="A\x07\nB", in_set=False,
                           withheld=None)  # fmt: skip
    [asked] = [b for b in hostile["blocks"] if b["type"] == "section" and b["text"]["type"] == "plain_text"]
    assert asked["text"]["text"] == "Question: Q[31m red ]]> [/]"  # shown as written, control characters left out
    assert hostile["blocks"][-1]["element"]["initial_value"] == "A\nB"


def _occurrence(ts: str) -> Occurrence:
    pair = {"id": 1, "channel_id": "C1", "question_ts": ts, "answer_ts": ts + "1", "question_text": " Q? "}
    return occurrence_of_pair(pair | {"reference_text": "R", "channel_is_private": 0}, origin=ORIGIN_TAKEOVER,
                              permalink=None)  # fmt: skip


def test_a_deletion_leaves_the_newest_source_or_takes_the_item_away() -> None:
    first, second = _occurrence("1.0"), _occurrence("2.0")
    assert first.question == "Q?" and first.expected == "R" and not first.private and first.question_ts == "1.0"
    assert after_deletion([], imported=False).delete_item
    assert not after_deletion([], imported=True).delete_item
    refill = after_deletion([first, second], imported=False)
    assert not refill.delete_item and refill.source == second


def test_an_imported_item_outlives_its_linked_messages_but_a_private_channels_does_not() -> None:
    assert keeps_without_sources(ORIGIN_IMPORT, False)
    assert not keeps_without_sources(ORIGIN_IMPORT, True)  # made by an import from a private channel's pair
    assert not keeps_without_sources(ORIGIN_TAKEOVER, False)


def test_only_public_channels_askings_join_an_imported_item() -> None:
    public, private = _occurrence("1.0"), replace(_occurrence("2.0"), channel_id="G1", private=True)
    later = _occurrence("3.0")
    assert split_links([public, private, later]) == ([public, later], [private])
    assert split_links([]) == ([], [])
