"""The outcome of an answer read from history (capture.history_outcomes): a whole thread walked through the live
rules, message by message, with the answer's reactions as history shows them."""

from __future__ import annotations

from capture import history_outcomes as h
from capture import outcomes as o
from capture.history import read_message
from capture.pairing import Identity, LoggedMessage
from capture.teammates import StaffEvidence
from store.settings import DEFAULT_ESCALATION_PHRASES, DEFAULT_NEGATIVE_REACTIONS, DEFAULT_POSITIVE_REACTIONS

ROOT = "1000.000000"
ANSWER = "1010.000000"
WATCH = o.Watch(pair_id=1, answer_ts=ANSWER, thread_key=ROOT, asker="U_ASKER", closes_at=1010.0 + 1800)
STAFF = StaffEvidence(alert_members=frozenset({"U_AGENT"}))


def raw(ts: float, text: str, user: str = "U_ASKER", **extra) -> dict:
    return {"type": "message", "ts": f"{ts:.6f}", "thread_ts": ROOT, "user": user, "text": text, **extra}


def thread(*later: dict, reactions: list[dict] | None = None) -> tuple[list[LoggedMessage], list[LoggedMessage]]:
    answer = raw(1010, "Press Rotate in Settings.", user="U_BOT", bot_id="B_BOT")
    if reactions is not None:
        answer["reactions"] = reactions
    messages = [{**raw(1000, "How do I rotate my key?")}, answer, *later]
    logged = [m for m in (read_message(r, ["B_BOT"], Identity()) for r in messages) if m]
    return logged, [logged[1]]


def outcome_of(*later: dict, reactions: list[dict] | None = None) -> h.ThreadOutcome:
    logged, parts = thread(*later, reactions=reactions)
    return h.thread_outcome(
        WATCH,
        logged,
        parts,
        phrases=DEFAULT_ESCALATION_PHRASES,
        evidence_of=lambda _message: STAFF,
        negative=DEFAULT_NEGATIVE_REACTIONS,
        positive=DEFAULT_POSITIVE_REACTIONS,
    )


def test_a_reask_then_a_teammates_reply_fail_the_answer_and_the_reply_is_the_reference() -> None:
    result = outcome_of(raw(1100, "Where is Settings?"), raw(1200, "Top right, under your avatar.", "U_AGENT"))
    assert result.signals == {o.REASK, o.HUMAN_TAKEOVER} and result.closing() == frozenset()
    assert result.reference is not None and result.reference.ts == "1200.000000"
    assert [event.at for event in result.events] == [1100.0, 1200.0]  # each signal at its message's time


def test_a_quiet_thread_closes_resolved() -> None:
    result = outcome_of()
    assert result.signals == frozenset() and result.closing() == {o.RESOLVED} and result.reference is None


def test_messages_after_the_window_say_nothing() -> None:
    result = outcome_of(raw(1010 + 1801, "Where is Settings?"), raw(1010 + 1900, "Top right.", "U_AGENT"))
    assert result.signals == frozenset() and result.closing() == {o.RESOLVED}


def test_after_the_asker_moved_on_a_teammates_reply_is_about_the_new_question() -> None:
    result = outcome_of(
        raw(1100, "Thanks! Also, how do I export my invoices as CSV?"), raw(1200, "Billing, Export, CSV.", "U_AGENT")
    )
    assert o.HUMAN_TAKEOVER not in result.signals and result.reference is None
    assert {o.THANKED, o.NEW_QUESTION} <= result.signals


def test_someone_who_is_not_staff_takes_nothing_over() -> None:
    result = outcome_of(raw(1100, "Same problem here, it just spins.", "U_OTHER"))
    assert result.signals == frozenset()


def test_the_answers_reactions_count_at_the_answers_time() -> None:
    result = outcome_of(reactions=[{"name": "-1::skin-tone-2", "users": ["U_ASKER"], "count": 1}])
    assert result.signals == {o.NEGATIVE_REACTION} and result.closing() == frozenset()
    assert [event.at for event in result.events] == [float(ANSWER)]
    unknown = outcome_of(reactions=[{"name": "eyes", "users": ["U_ASKER"], "count": 1}])
    assert unknown.signals == frozenset()


def test_helpers_are_the_replies_that_answer_someone_else() -> None:
    logged, _ = thread(raw(1100, "Where is Settings?"), raw(1200, "Top right.", "U_AGENT"), raw(1300, "Why?", "U_X"))
    assert [m.user for m in h.helpers(logged, "U_ASKER")] == ["U_AGENT"]
