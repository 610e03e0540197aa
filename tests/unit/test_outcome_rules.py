"""The outcome rules (capture.outcomes): which message or reaction after an answer gives which signal."""

from __future__ import annotations

import pytest

from capture import outcomes as o
from capture.pairing import Author, LoggedMessage
from capture.teammates import StaffEvidence
from store.settings import DEFAULT_ESCALATION_PHRASES, DEFAULT_NEGATIVE_REACTIONS, DEFAULT_POSITIVE_REACTIONS

ANSWER = "1000.000100"
WATCH = o.Watch(pair_id=7, answer_ts=ANSWER, thread_key="999.000100", asker="U_ASKER", closes_at=1000.0001 + 1800)


def msg(ts: float, user: str = "U_ASKER", *, thread: str | None = "999.000100", **kw) -> LoggedMessage:
    return LoggedMessage(ts=f"{ts:.6f}", thread_ts=thread, author=kw.pop("author", Author.HUMAN), user=user, **kw)


# RELMON_SUPPORT_TEAM unset: U_AGENT is staff on evidence (a member of the alert channel).
STAFF = StaffEvidence(alert_members=frozenset({"U_AGENT"}))


def outcome(message: LoggedMessage, text: str, team=None, mentions=(), watch: o.Watch = WATCH) -> set[str]:
    evidence = StaffEvidence(team=frozenset(team)) if team else STAFF
    result = o.message_outcome(
        watch, message, text, phrases=DEFAULT_ESCALATION_PHRASES, evidence=evidence, team_mentions=mentions
    )
    return set(result.signals)


def test_the_asker_asking_again_in_the_thread_is_a_reask() -> None:
    assert outcome(msg(1100), "And how do I do that on Android?") == {o.REASK}


def test_a_new_top_level_question_by_the_asker_within_the_window_is_a_reask() -> None:
    assert outcome(msg(1100, thread=None), "How do I rotate a key, again?") == {o.REASK}
    assert outcome(msg(1100, user="U_OTHER", thread=None), "Unrelated question") == set()


def test_nothing_before_the_answer_or_after_the_window_counts() -> None:
    assert outcome(msg(999.5), "earlier") == set()
    assert outcome(msg(1000.0001 + 1801), "too late") == set()


def test_a_message_in_another_thread_does_not_count() -> None:
    assert outcome(msg(1100, thread="500.000000"), "other thread") == set()


def _teammates_answer() -> o.MessageOutcome:
    return o.message_outcome(WATCH, msg(1100, user="U_AGENT"), "Use Settings > Keys.", phrases=(), evidence=STAFF)


def test_another_person_replying_in_the_thread_is_a_takeover() -> None:
    assert set(_teammates_answer().signals) == {o.HUMAN_TAKEOVER}


def test_a_teammates_answer_in_the_thread_is_the_pairs_reference() -> None:
    assert _teammates_answer().reference is True


def test_with_a_support_team_only_its_members_take_over() -> None:
    assert outcome(msg(1100, user="U_PASSERBY"), "me too", team={"U_AGENT"}) == set()
    assert outcome(msg(1100, user="U_AGENT"), "Try this", team={"U_AGENT"}) == {o.HUMAN_TAKEOVER}


@pytest.mark.parametrize(
    "text",
    ["Can I talk to a human?", "That didn’t help", "this does not work", "I need a REAL person", "not helpful at all"],
)
def test_escalation_phrases(text: str) -> None:
    assert outcome(msg(1100), text) == {o.ESCALATION}


def test_mentioning_the_support_team_is_an_escalation() -> None:
    assert outcome(msg(1100), "<!subteam^S_SUPPORT|@support> help", mentions={"S_SUPPORT"}) == {o.ESCALATION}
    assert outcome(msg(1100), "<@U_AGENT> can you look?", mentions={"U_AGENT"}) == {o.ESCALATION}
    assert outcome(msg(1100), "<@U_FRIEND> look at this", mentions={"U_AGENT"}) == {o.REASK}


def test_thanks() -> None:
    assert outcome(msg(1100), "Thanks, that worked!") == {o.THANKED}
    assert outcome(msg(1100), "ty") == {o.THANKED}
    assert outcome(msg(1100), "thanks but that didn't help") == {o.ESCALATION}


def test_a_bots_deleted_or_wordless_message_does_not_count() -> None:
    assert outcome(msg(1100, author=Author.MONITORED_BOT), "another answer") == set()
    assert outcome(msg(1100, deleted=True), "gone") == set()
    assert outcome(msg(1100, wordless=True), "") == set()


def test_the_bots_filter_takes_only_open_watches_that_a_message_concerns() -> None:
    other = o.Watch(8, "1500.000000", "1500.000000", "U_B", closes_at=1500.0 + 60)
    assert o.watching([WATCH, other], msg(1100), now=1100) == [7]
    assert o.watching([WATCH, other], msg(1100), now=WATCH.closes_at + 1) == []


def test_a_top_level_message_re_asks_only_the_askers_latest_answered_question() -> None:
    """Ana's answers: one in the first thread, two in a later one; Bo's one. Her top-level message is news for
    the answers of the thread she was answered in last before it, not for every answer of the window."""
    later_a = o.Watch(9, "1200.000000", "1150.000000", "U_ASKER", closes_at=1200.0 + 1800)
    later_b = o.Watch(8, "1300.000000", "1150.000000", "U_ASKER", closes_at=1300.0 + 1800)
    bos = o.Watch(10, "1350.000000", "1340.000000", "U_B", closes_at=1350.0 + 1800)
    watches = [WATCH, later_a, later_b, bos]
    assert o.watching(watches, msg(1400, thread=None), now=1400) == [8, 9]  # the later thread, in ID order
    assert o.watching(watches, msg(1250, thread=None), now=1250) == [9]  # answer 8 came after the message
    assert o.watching(watches, msg(1100, thread=None), now=1100) == [7]
    assert o.watching(watches, msg(1400, user="U_B", thread=None), now=1400) == [10]
    assert o.watching(watches, msg(1400, user="U_C", thread=None), now=1400) == []
    # The latest thread's windows closed: nothing is re-asked (the earlier ones closed before them).
    assert o.watching(watches, msg(3200, thread=None), now=3200) == []


def test_a_thread_message_is_news_for_every_open_answer_of_that_thread_only() -> None:
    later_a = o.Watch(9, "1200.000000", "1150.000000", "U_ASKER", closes_at=1200.0 + 1800)
    later_b = o.Watch(8, "1300.000000", "1150.000000", "U_ASKER", closes_at=1300.0 + 1800)
    watches = [WATCH, later_a, later_b]
    assert o.watching(watches, msg(1400, user="U_AGENT", thread="1150.000000"), now=1400) == [8, 9]
    assert o.watching(watches, msg(1400, thread="999.000100"), now=1400) == [7]
    assert o.watching(watches, msg(2900, thread="1150.000000"), now=2900) == [8, 9]
    assert o.watching(watches, msg(3050, thread="1150.000000"), now=3050) == [8]  # 9's window closed at 3000


def test_reactions() -> None:
    neg, pos = DEFAULT_NEGATIVE_REACTIONS, DEFAULT_POSITIVE_REACTIONS
    assert o.reaction_signal("-1", neg, pos) == o.NEGATIVE_REACTION
    assert o.reaction_signal("+1::skin-tone-3", neg, pos) == o.POSITIVE_REACTION
    assert o.reaction_signal("white_check_mark", neg, pos) == o.POSITIVE_REACTION
    assert o.reaction_signal("eyes", neg, pos) is None


def test_the_window_closes_resolved_only_without_a_failure_signal() -> None:
    assert o.closing_signals([]) == {o.RESOLVED}
    assert o.closing_signals([o.THANKED, o.POSITIVE_REACTION]) == {o.RESOLVED}
    for failure in (o.REASK, o.HUMAN_TAKEOVER, o.ESCALATION, o.NEGATIVE_REACTION):
        assert o.closing_signals([failure]) == set()


def test_a_reask_alone_is_no_failure() -> None:
    assert not o.failed([o.REASK])


def test_a_reask_confirmed_by_a_takeover_or_a_bad_reaction_is_a_failure() -> None:
    assert o.failed([o.REASK, o.HUMAN_TAKEOVER]) and o.failed([o.REASK, o.NEGATIVE_REACTION])


def test_an_escalation_fails_only_once_a_teammate_steps_in() -> None:
    assert not o.failed([o.ESCALATION, o.NEGATIVE_REACTION])
    # "That did not help" (or "a human, please") and a teammate stepped in: failed, re-asked or not.
    assert o.failed([o.ESCALATION, o.HUMAN_TAKEOVER])


def test_a_new_question_never_fails_the_answer() -> None:
    # A new, different question says nothing about the answer, whoever replies to it.
    assert not o.failed([o.NEW_QUESTION, o.HUMAN_TAKEOVER]) and not o.failed([o.NEW_QUESTION, o.THANKED])


def test_labels_for_evaluation() -> None:
    assert o.outcome_label([o.RESOLVED, o.THANKED]) == "good"
    assert o.outcome_label([o.REASK]) == "bad"
    assert o.outcome_label([o.THANKED]) is None  # the window is still open


def test_descriptions() -> None:
    assert o.describe_signal(o.REASK, 130) == "asked again 2 min later"
    assert o.describe_signal(o.HUMAN_TAKEOVER, 20) == "a teammate replied within a minute"
    assert o.describe_signal(o.RESOLVED, None) == "resolved"


SSO = o.Watch(7, ANSWER, "999.000100", "U_ASKER", 1000.0001 + 1800, topic="How do I set up SSO with Okta?\nUse SAML.")


def test_one_message_carries_several_signals() -> None:
    """An escalation and a re-ask; thanks and a new question; the escalation's own words ask nothing new."""
    assert outcome(msg(1100), "That did not help, how do I get SSO working?", watch=SSO) == {o.ESCALATION, o.REASK}
    assert outcome(msg(1100), "Thanks! How do I export my invoices?", watch=SSO) == {o.THANKED, o.NEW_QUESTION}
    assert outcome(msg(1100), "Thanks, that worked!", watch=SSO) == {o.THANKED}
    assert outcome(msg(1100), "That did not help. Can I talk to a human?", watch=SSO) == {o.ESCALATION}


def test_a_new_different_question_is_not_a_reask() -> None:
    assert outcome(msg(1100), "How do I export my invoices as CSV?", watch=SSO) == {o.NEW_QUESTION}
    assert outcome(msg(1100), "Where do I paste the Okta metadata?", watch=SSO) == {o.REASK}  # its words
    assert outcome(msg(1100), "And on the mobile app?", watch=SSO) == {o.REASK}  # a follow-up
    assert outcome(msg(1100), "I tried that and it still fails", watch=SSO) == {o.REASK}
    assert outcome(msg(1100), "How do I export my invoices as CSV?") == {o.REASK}  # topic unknown: as before


def test_another_customers_reply_never_takes_over() -> None:
    assert outcome(msg(1100, user="U_OTHER"), "Same here, any fix?") == set()
    assert outcome(msg(1100, user="U_OTHER"), "Try reinstalling, worked for me.") == set()  # no evidence


def test_a_teammates_question_does_not_take_over() -> None:
    assert outcome(msg(1100, user="U_AGENT"), "Which browser are you on?") == set()  # a question: no reference


def test_an_external_persons_reply_never_takes_over() -> None:
    external = msg(1100, user="U_AGENT", external=True)
    assert outcome(external, "Use Settings > Keys.") == set()  # Slack Connect: their organisation's person


def test_the_askers_own_reply_is_a_reask_even_from_a_teammate() -> None:
    asked_by_agent = o.Watch(7, ANSWER, "999.000100", "U_AGENT", 1000.0001 + 1800)
    assert outcome(msg(1100, user="U_AGENT"), "never mind, found it", watch=asked_by_agent) == {o.REASK}


def test_a_signal_belongs_to_the_answer_it_concerns() -> None:
    """The asker's second, different question in the thread: a teammate's later reply is about it, not the
    first answer; a follow-up of the same problem keeps the first answer concerned."""
    second = msg(1100)
    assert o.moved_on(SSO, [(second, "How do I export my invoices as CSV?")], DEFAULT_ESCALATION_PHRASES)
    assert not o.moved_on(SSO, [(second, "Where do I paste the Okta metadata?")], DEFAULT_ESCALATION_PHRASES)
    assert o.moved_on(SSO, [(second, "Thanks! Another thing: how do I add users?")], DEFAULT_ESCALATION_PHRASES)
    other = msg(1100, user="U_OTHER")
    assert not o.moved_on(SSO, [(other, "How do I export my invoices as CSV?")], DEFAULT_ESCALATION_PHRASES)
    assert not o.moved_on(SSO, [(msg(999.9), "How do I export?")], DEFAULT_ESCALATION_PHRASES)  # before it
