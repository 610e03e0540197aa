"""Who is a teammate, and what a message asks: plain rules over plain data, for the outcome signals
(capture.outcomes). Tested directly and measured on a labelled set of thread snippets
(tests/unit/test_teammate_rule.py).

A reply in an answer's thread is a teammate's (a takeover, and the pair's reference) only when it is decided so:
- with RELMON_SUPPORT_TEAM set, only its people (or its user group's members) are teammates;
- unset, a person counts as staff only on evidence: a member of the alert channel, or someone who answered
  several other people's threads in the channel lately. Never the asker, never an external (Slack Connect) person,
  and never a message that is itself a question: a second customer's "same here, any fix?" is a question, paired
  when the bot answers it.

What a message asks decides too whether a signal belongs to an answer: the asker's new, different question starts
a new conversation in the thread (`new_question`), and later replies concern the answer to it, not the earlier one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field


def words(text: str) -> frozenset[str]:
    """A set of words written as one string."""
    return frozenset(text.split())


# Answered this many other people's threads in the channel lately (HELPED_DAYS): staff by evidence.
HELPED_THREADS_MIN = 3
HELPED_DAYS = 14

_QUESTION_WORDS = words(
    "how what why where when who whom whose which is are am was were can could does do did should would "
    "will has have had may might any anyone anybody"
)
# A second customer joining the thread with the same problem: a question of their own, never an answer.
_ME_TOO = re.compile(
    r"^\W*(\+1|same\b|me too|us too|ditto|i('m| am) (also|seeing|having|getting)|we('re| are) (also |seeing|having)"
    r"|i (also )?(have|get|see) the same|also (seeing|having|getting)|any (update|news|fix|idea|luck)"
    r"|following|bump\b|\^+$)",
    re.IGNORECASE,
)
# The beginnings of an answer or an instruction: "Try …", "Go to …", "You can …", "It's under …".
_ANSWERS = re.compile(
    r"^\W*(try|go to|open|click|use|set|run|check|make sure|restart|clear|install|update|enable|disable|select|"
    r"press|tap|add|remove|turn|head to|navigate|paste|upload|re-?upload|copy|log (in|out)|sign (in|out)|type|"
    r"reinstall|download|send|create|wait|follow|reconnect|refresh|reset|rotate|delete|email|contact|see|"
    r"you (can|need|should|have to|must|'ll|will)|it('s| is)|"
    r"that('s| is)|this (is|was)|there('s| is)|here('s| is)|the (fix|answer|setting|option|problem)|"
    r"we('ve| have)|i('ve| have) (fixed|reset|updated|changed|enabled|restarted|sent|added)|fixed|done|"
    r"sorry|yes|no|yep|nope)\b",
    re.IGNORECASE,
)
_FOLLOW_UP = re.compile(
    r"^\W*(and|also|but|so|then|ok|okay|what about|how about|still|again|same|that|it|this|there|those|these)\b",
    re.IGNORECASE,
)
_ANAPHORA = re.compile(r"\b(that|it|this|there|those|these|again|still|above|your answer|the answer)\b", re.IGNORECASE)
_MARKUP = re.compile(r"<[^>]*>|`[^`]*`")
_WORD = re.compile(r"[a-z0-9][a-z0-9'-]*")
_STOP = words(
    "the a an and or but to of in on at for with from by about as into i me my we our you your it its is "
    "are was were be been am do does did how what why where when who which can could should would will "
    "there here this that these those not no yes any some get got have has had just so then than please "
    "help thanks thank hi hello hey also still again up out if all one more very really need want know "
    "tried try working work works way use using new other same like there's it's i'm don't doesn't didn't "
    "can't"
)
_JOINS = re.compile(r"[;,]\s+|\s+but\s+", re.IGNORECASE)


def _without_markup(text: str) -> str:
    return " ".join(_MARKUP.sub(" ", text).replace("’", "'").split())


def sentences(text: str) -> list[str]:
    """The sentences of a message, each with its closing punctuation."""
    return [s.strip() for s in re.findall(r"[^.!?\n]+[.!?]*", _without_markup(text)) if s.strip(" .!?")]


def _asks(sentence: str) -> bool:
    words = _WORD.findall(sentence.lower())
    return sentence.rstrip().endswith("?") or (bool(words) and words[0] in _QUESTION_WORDS and len(words) >= 3)


def is_question(text: str) -> bool:
    """The message is itself a question: its first sentence asks (ends in "?", or opens with a question word and
    is no answer: "Try X", "You can …"), or a later sentence asks something of its own words; or a second
    customer's "same here". An answer with a check-in ("Paste the URL. Does that work?") is no question."""
    plain = _without_markup(text)
    if not plain:
        return False
    if _ME_TOO.search(plain):
        return True
    first, *rest = sentences(plain) or [plain]
    if _asks(first) and not (_ANSWERS.search(first) and not first.rstrip().endswith("?")):
        return True
    return any(_asks(sentence) and content_words(sentence) for sentence in rest)


def content_words(text: str) -> set[str]:
    """What a text is about: its words less the common ones, cut to a stem (five letters: rotate/rotating)."""
    return {w[:5] for w in _WORD.findall(_without_markup(text).lower()) if len(w) > 2 and w not in _STOP}


def is_new_question(text: str, topic: str) -> bool:
    """The asker asks something new, not again: a question about none of the words of the earlier question and its
    answer (`topic`), with no follow-up cue ("and on Android?", "where is that?"). Unknown topic: never new."""
    plain = _without_markup(text)
    if not topic.strip() or not is_question(plain) or _FOLLOW_UP.search(plain) or _ANAPHORA.search(plain):
        return False
    words = content_words(plain)
    return len(words) >= 2 and not words & content_words(topic)


def clauses(text: str) -> list[str]:
    """A message cut into its clauses (sentences, and the parts a comma or "but" joins); a sentence's last clause
    keeps its "?"."""
    return [c.strip() for sentence in sentences(text) for c in _JOINS.split(sentence) if c.strip(" .!?")]


@dataclass(frozen=True)
class StaffEvidence:
    """What says who is staff in a channel. `team`: RELMON_SUPPORT_TEAM as user IDs, or None when it is unset (then
    the evidence decides: the alert channel's members, and how many other people's threads each person answered
    lately in the channel)."""

    team: frozenset[str] | None = None
    alert_members: frozenset[str] = frozenset()
    helped: Mapping[str, int] = field(default_factory=dict)

    def is_staff(self, user: str | None) -> bool:
        if not user:
            return False
        if self.team is not None:
            return user in self.team
        return user in self.alert_members or self.helped.get(user, 0) >= HELPED_THREADS_MIN


@dataclass(frozen=True)
class Reply:
    """A person's message in an answer's thread, by someone other than the bot."""

    user: str | None
    text: str
    external: bool = False  # from another organisation (Slack Connect)


def teammate_reply(reply: Reply, asker: str | None, evidence: StaffEvidence) -> bool:
    """A teammate's reply to the asker: a takeover, and the answer's reference. Never the asker's own message, nor
    an external person's, nor a question; with a support team set, only its people; else staff on evidence."""
    if not reply.user or reply.user == asker or not reply.text.strip():
        return False
    if reply.external and evidence.team is None:
        return False
    return evidence.is_staff(reply.user) and not is_question(reply.text)


def helped_someone(reply: Reply, asker: str | None) -> bool:
    """Evidence for later: a person answered someone else's thread (no question of their own, not external)."""
    return bool(reply.user) and reply.user != asker and not reply.external and not is_question(reply.text)
