"""Outcome signals of an answer read from history (`relmon backfill`, `relmon import`): the whole thread is known at
once, so the messages after the answer are walked in order through the live path's own rules (capture.outcomes:
`concerns`, `moved_on`, `message_outcome`, `reaction_signal`, `closing_signals`), as the workers would have met
them one by one. Plain data in, plain data out; the store side is relmon.backfill.outcomes.

The thread holds the answer's thread and the asker's top-level messages that are news for it (capture.history:
`HistoryPairer` keeps the last outcome window's). What history cannot give as live capture does: when a reaction
was added (it counts at the answer's time), and a reaction taken back (absent from history, as from the outcome)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from capture.outcomes import Watch, closing_signals, message_outcome, moved_on, reaction_signal
from capture.pairing import Author, LoggedMessage, ts_key
from capture.teammates import Reply, StaffEvidence, helped_someone
from capture.text import message_text


@dataclass(frozen=True)
class SignalsAt:
    """The signals one message (or the answer's reactions) gave, at that message's time."""

    names: frozenset[str]
    at: float
    reference: LoggedMessage | None = None  # the teammate's reply that became the pair's reference


@dataclass(frozen=True)
class ThreadOutcome:
    events: tuple[SignalsAt, ...]

    @property
    def signals(self) -> frozenset[str]:
        return frozenset(name for event in self.events for name in event.names)

    @property
    def reference(self) -> LoggedMessage | None:
        """The first teammate reply (the live path keeps the first one only)."""
        return next((event.reference for event in self.events if event.reference is not None), None)

    def closing(self) -> frozenset[str]:
        """What the window's end adds (`resolved` when nothing said the answer failed)."""
        return closing_signals(self.signals)


def later_messages(watch: Watch, thread: Sequence[LoggedMessage]) -> list[LoggedMessage]:
    """The thread's messages after the answer, oldest first."""
    return sorted((m for m in thread if m.seconds > watch.opens_at), key=ts_key)


def helpers(thread: Sequence[LoggedMessage], asker: str | None) -> list[LoggedMessage]:
    """The replies that are evidence someone helps others (capture.teammates.helped_someone), as the live path
    notes them (capture.outcome_watches.note_helped)."""
    return [
        m
        for m in thread
        if m.in_thread
        and m.author == Author.HUMAN  # the live path hands on people's messages only
        and helped_someone(Reply(m.user, message_text(m.content), m.external), asker)
    ]


def thread_outcome(
    watch: Watch,
    thread: Sequence[LoggedMessage],
    answer_parts: Sequence[LoggedMessage],
    *,
    phrases: Collection[str],
    evidence_of: Callable[[LoggedMessage], StaffEvidence],
    team_mentions: Collection[str] = (),
    negative: Collection[str] = (),
    positive: Collection[str] = (),
) -> ThreadOutcome:
    """The signals a whole thread gives one answer (`answer_parts`: the answer's messages, whose reactions count),
    message by message with the live rules: a message after the asker moved on to a new question is about that one."""
    later = later_messages(watch, thread)
    events: list[SignalsAt] = []
    for index, message in enumerate(later):
        text = message_text(message.content)
        between = [(m, message_text(m.content)) for m in later[:index] if m.in_thread]
        if message.in_thread and moved_on(watch, between, phrases):
            continue
        evidence = evidence_of(message) if message.in_thread and message.user != watch.asker else StaffEvidence()
        outcome = message_outcome(
            watch,
            message,
            text,
            phrases=phrases,
            evidence=evidence,
            team_mentions=team_mentions,
            raw_text=str(message.content.get("text") or ""),
        )
        if outcome.signals:
            events.append(SignalsAt(outcome.signals, message.seconds, message if outcome.reference else None))
    reacted = reaction_signals(answer_parts, negative, positive)
    if reacted:
        events.append(SignalsAt(reacted, watch.opens_at))
    return ThreadOutcome(tuple(events))


def reaction_signals(
    parts: Sequence[LoggedMessage], negative: Collection[str], positive: Collection[str]
) -> frozenset[str]:
    """The reactions history shows on the answer's messages, as signals (any person's, as live)."""
    found = set()
    for part in parts:
        for reaction in part.content.get("reactions") or []:
            if isinstance(reaction, dict) and reaction.get("name") and (reaction.get("users") or reaction.get("count")):
                name = reaction_signal(str(reaction["name"]), negative, positive)
                if name is not None:
                    found.add(name)
    return frozenset(found)
