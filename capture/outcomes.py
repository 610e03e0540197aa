"""Outcome signals: what the customer did next. Plain rules over plain data (`now` passed in).

For RELMON_OUTCOME_WINDOW after a captured answer, the messages and reactions that follow it give the pair
signals (the user-facing list is in docs/capture.md):
- `reask`: the asker writes again after the answer, in its thread or at top level in the channel (a rephrased
  question is simply a new top-level message by the same asker within the window, and it re-asks their latest
  answered question: `watching`), other than thanks or an escalation, and not a new, different question;
- `new_question`: the asker asks something new, about none of the answer's words, or after thanking it
  (capture.teammates.is_new_question): not a failure, and later messages of the thread concern the answer to the
  new question, not this one (`moved_on`);
- `human_takeover`: a teammate replies in the thread after the answer (capture.teammates.teammate_reply: the
  support team when RELMON_SUPPORT_TEAM is set, else staff on evidence; never the asker, an external person, or
  a question); the reply becomes the pair's reference;
- `escalation`: the asker asks for a human or says the answer did not help (RELMON_ESCALATION_PHRASES), or
  mentions the support team;
- `negative_reaction` / `positive_reaction`: a reaction on the answer from the configured emoji sets;
- `thanked`: the asker thanks the bot;
- `resolved`: the window closed with no reask, takeover, escalation or negative reaction.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from capture.pairing import Author, LoggedMessage
from capture.teammates import (
    Reply,
    StaffEvidence,
    clauses,
    content_words,
    is_new_question,
    is_question,
    teammate_reply,
    words,
)
from store.signals import (  # the names' home; the rules here are what finds them
    ESCALATION,
    HUMAN_TAKEOVER,
    NEGATIVE_REACTION,
    NEW_QUESTION,
    POSITIVE_REACTION,
    REASK,
    RESOLVED,
    THANKED,
)

# Any of these means the conversation did not end well: the window closes unresolved.
FAILURE_SIGNALS = frozenset({REASK, HUMAN_TAKEOVER, ESCALATION, NEGATIVE_REACTION})
# With a reask, these say the answer failed (a reask alone may be a new question).
FAILURE_CONFIRMATIONS = frozenset({HUMAN_TAKEOVER, ESCALATION, NEGATIVE_REACTION})

_THANKS = re.compile(r"\b(thanks?|thank you|thx|ty|tysm|cheers|appreciated?|much obliged)\b", re.IGNORECASE)
_MENTION = re.compile(r"<(?:@|!subteam\^)([^|>]+)(?:\|[^>]*)?>")


@dataclass(frozen=True)
class Watch:
    """One answer whose conversation relmon watches: times in seconds since the epoch."""

    pair_id: int
    answer_ts: str
    thread_key: str  # the thread of the answer (its question's, or its own when it is top-level)
    asker: str | None
    closes_at: float
    parts: tuple[str, ...] = ()  # the ts of the answer's later messages (a multi-message answer): reactions count
    # What the answer is about (its question and answer texts), to tell a re-ask from a new question; the workers
    # know it, the bot's board does not keep it.
    topic: str = field(default="", compare=False)

    @property
    def opens_at(self) -> float:
        return float(self.answer_ts)


def window_closes_at(answer_ts: str, window_seconds: float) -> float:
    return float(answer_ts) + window_seconds


def is_open(watch: Watch, now: float) -> bool:
    return now <= watch.closes_at


def concerns(watch: Watch, message: LoggedMessage) -> bool:
    """Whether a person's message may tell something about the answer: after it and within the window, in its
    thread (anyone), or at top level in the channel (the asker)."""
    if message.author != Author.HUMAN or message.deleted or message.wordless:
        return False
    if not watch.opens_at < message.seconds <= watch.closes_at:
        return False
    if message.in_thread:
        return message.thread_key == watch.thread_key
    return message.user is not None and message.user == watch.asker


def watching(watches: Iterable[Watch], message: LoggedMessage, now: float) -> list[int]:
    """The pairs a message is news for, in ID order (the bot's filter before it hands the message to a worker):
    in a thread, the thread's open watches; at top level, the asker's latest answered question only (the open
    watches of the thread of their latest answer before the message). A rephrased question re-asks what was
    answered last, not every question of the window: so an asker's message concerns a few watches, not all of
    theirs, and a burst of questions costs the workers linear, not quadratic, work."""
    concerned = [w for w in watches if is_open(w, now) and concerns(w, message)]
    if concerned and not message.in_thread:
        latest = max(concerned, key=lambda w: (w.opens_at, w.answer_ts))
        concerned = [w for w in concerned if w.thread_key == latest.thread_key]
    return sorted(w.pair_id for w in concerned)


def is_thanks(text: str) -> bool:
    return bool(_THANKS.search(text))


def is_escalation(text: str, phrases: Collection[str], team: Collection[str] = (), raw_text: str | None = None) -> bool:
    """Asks for a human, says the answer did not help, or mentions the support team (a member or its group;
    mentions are read in `raw_text`, Slack's mrkdwn, when the plain text has them rendered as names)."""
    lowered = " ".join(text.lower().replace("’", "'").split())
    if any(phrase.lower() in lowered for phrase in phrases if phrase.strip()):
        return True
    return bool(team) and any(mentioned in team for mentioned in _MENTION.findall(raw_text or text))


@dataclass(frozen=True)
class MessageOutcome:
    signals: frozenset[str]
    reference: bool = False  # the message is a teammate's answer: the pair's reference


# Words that only say "someone, look at this": an escalation's remainder that asks nothing new.
_ESCALATION_WORDS = frozenset(
    word[:5] for word in words("look check someone anyone human person agent talk speak call contact support team real")
)


def asker_signals(
    text: str, topic: str, *, phrases: Collection[str], mentions: Collection[str] = (), raw_text: str | None = None
) -> frozenset[str]:
    """The signals of the asker's message after an answer (`topic`: the answer's question and text). One message can
    give several: "That did not help, how do I get SSO working?" is an escalation and a re-ask; "Thanks! How do I
    export?" is thanks and a new question. The clauses that escalate or thank are set apart; what is left asks
    again (`reask`), or something new (`new_question`); left with nothing, a message with neither is a re-ask."""
    escalated = is_escalation(text, phrases, mentions, raw_text)
    thanked = not escalated and is_thanks(text)
    found = {ESCALATION} if escalated else {THANKED} if thanked else set()
    if not found:
        return frozenset({NEW_QUESTION if is_new_question(text, topic) else REASK})
    rest = [part for part in clauses(text) if not is_escalation(part, phrases) and not is_thanks(part)]
    asked = " ".join(rest)
    if not rest or not (content_words(asked) - _ESCALATION_WORDS) or not _asks_anything(asked):
        return frozenset(found)  # "Thanks, that worked!", "That didn't help", "<@agent> can you look?"
    found.add(NEW_QUESTION if thanked or is_new_question(asked, topic) else REASK)
    return frozenset(found)


def _asks_anything(text: str) -> bool:
    return is_question(text) or text.rstrip().endswith("?")


def message_outcome(
    watch: Watch,
    message: LoggedMessage,
    text: str,
    *,
    phrases: Collection[str],
    evidence: StaffEvidence | None = None,
    team_mentions: Collection[str] = (),
    raw_text: str | None = None,
) -> MessageOutcome:
    """The signals one message after the answer gives. `evidence`: who is staff (capture.teammates; None: nobody is
    known to be); `team_mentions`: the IDs whose mention is an escalation (members and groups)."""
    if not concerns(watch, message) or not text.strip():
        return MessageOutcome(frozenset())
    if message.user != watch.asker:
        reply = Reply(message.user, text, message.external)
        if message.in_thread and teammate_reply(reply, watch.asker, evidence or StaffEvidence()):
            return MessageOutcome(frozenset({HUMAN_TAKEOVER}), reference=True)
        return MessageOutcome(frozenset())
    return MessageOutcome(asker_signals(text, watch.topic, phrases=phrases, mentions=team_mentions, raw_text=raw_text))


def moved_on(watch: Watch, between: Iterable[tuple[LoggedMessage, str]], phrases: Collection[str]) -> bool:
    """The asker asked a new, different question in the answer's thread after it (`between`: the thread's messages
    from the answer up to the one at hand, with their texts): what comes later concerns the answer to that question,
    not this one. A teammate replying to the asker's second question does not touch the first answer."""
    return any(
        message.in_thread
        and message.user == watch.asker
        and concerns(watch, message)
        and NEW_QUESTION in asker_signals(text, watch.topic, phrases=phrases)
        for message, text in between
    )


def reaction_signal(emoji: str, negative: Collection[str], positive: Collection[str]) -> str | None:
    """The signal of a reaction (skin tones ignored: `+1::skin-tone-2` is `+1`)."""
    name = emoji.split("::", 1)[0]
    if name in negative:
        return NEGATIVE_REACTION
    if name in positive:
        return POSITIVE_REACTION
    return None


def closing_signals(signals: Collection[str]) -> frozenset[str]:
    """What the window's end adds: `resolved` when nothing said the answer failed."""
    return frozenset() if FAILURE_SIGNALS & set(signals) else frozenset({RESOLVED})


def failed(signals: Collection[str]) -> bool:
    """The conversation says the answer failed: a reask together with a takeover, escalation or negative
    reaction; or the asker said it did not help (or asked for a human) and a teammate stepped in. A new, different
    question is no reask: it says nothing about the answer."""
    names = set(signals)
    return (REASK in names and bool(FAILURE_CONFIRMATIONS & names)) or {ESCALATION, HUMAN_TAKEOVER} <= names


def outcome_label(signals: Collection[str]) -> str | None:
    """For evaluating the judge: resolved → good, unresolved (a failure signal) → bad, else unlabelled."""
    if RESOLVED in signals:
        return "good"
    if FAILURE_SIGNALS & set(signals):
        return "bad"
    return None


_PHRASES = {
    REASK: "asked again",
    HUMAN_TAKEOVER: "a teammate replied",
    ESCALATION: "asked for a human",
    NEGATIVE_REACTION: "reacted negatively",
    POSITIVE_REACTION: "reacted positively",
    THANKED: "said thanks",
    RESOLVED: "resolved",
    NEW_QUESTION: "asked something new",
}


def describe_signal(name: str, after_seconds: float | None) -> str:
    """One signal for people: "asked again 2 min later"."""
    phrase = _PHRASES.get(name, name)
    if after_seconds is None or name == RESOLVED:
        return phrase
    minutes = int(max(0.0, after_seconds) // 60)
    return f"{phrase} {minutes} min later" if minutes else f"{phrase} within a minute"
