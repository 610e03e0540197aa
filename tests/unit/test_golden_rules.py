"""The golden set's rules: duplicates, who joins, who may see, what a deletion leaves."""

from __future__ import annotations

from store.golden_rules import (
    ORIGIN_TAKEOVER,
    Occurrence,
    after_deletion,
    dedupe_key,
    joins_from_takeover,
    joins_from_vote,
    may_join,
    normalized_question,
    occurrence_of_pair,
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
