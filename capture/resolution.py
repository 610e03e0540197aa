"""Resolution tiers: what became of one answer, from its conversation's outcome signals, the bot's own signals and the
judge's verdict. Pure: plain data in, `now` and the window passed in (docs/resolution.md defines each tier and
compares them with Intercom Fin's and Zendesk's resolutions).

Once the window (RELMON_OUTCOME_WINDOW after the answer) is over, or the bot's side said the conversation ended, an
answer is in exactly one tier, the first that applies:

1. `escalated`: the asker asked for a human, said the answer did not help or called the support team in, or the
   bot handed the conversation off (the ingest API's `handoff`), whatever came after;
2. `teammate`: resolved after a teammate stepped in: a teammate replied in the thread unasked (a handoff that
   came with the person's reply is a handoff: 1.), whatever the asker or the bot's side said after it;
3. `unresolved`: re-asked (the asker asked the same again) or a 👎; or the bot said the conversation ended
   unresolved; or abandoned: nobody said anything after an answer the judge failed (a low score its second
   opinion did not overturn), and the asker neither thanked it nor reacted well;
4. `resolved`: resolved without help: confirmed (the asker thanked it or reacted well) or assumed (the window passed
   with nothing against the answer, as Fin's "assumed resolution"; the bot's `resolution: resolved` ends it so).

Before that the answer is `open`: its signals are not final, and no tally counts it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal, Protocol

from store.models import ConfirmationStatus, JudgmentStatus
from store.signals import (
    ESCALATION,
    HUMAN_TAKEOVER,
    NEGATIVE_REACTION,
    POSITIVE_REACTION,
    REASK,
    RESOLVED,
    THANKED,
)

RESOLVED_ALONE = "resolved"  # resolved without help
TEAMMATE = "teammate"  # resolved after a teammate stepped in
ESCALATED = "escalated"
UNRESOLVED = "unresolved"
OPEN = "open"  # the window is still running: not counted
TIERS = (RESOLVED_ALONE, TEAMMATE, ESCALATED, UNRESOLVED)  # in the order shown
Tier = Literal["resolved", "teammate", "escalated", "unresolved", "open"]

# Why an answer is in its tier (`Resolution.reason`): unresolved ones say which way it went wrong.
REASKED = "reasked"
NEGATIVE = NEGATIVE_REACTION  # the reason is the signal itself
ABANDONED = "abandoned"  # no word after a failed answer
ENDED_UNRESOLVED = "ended_unresolved"  # the bot's side said so
CONFIRMED = "confirmed"  # resolved: the asker (or the bot's side) said it helped
ASSUMED = "assumed"  # resolved: nothing said against it in the window
UNRESOLVED_REASONS = (REASKED, NEGATIVE, ABANDONED, ENDED_UNRESOLVED)

_FAILED_BY_ASKER = frozenset({REASK, NEGATIVE_REACTION})
_AGAINST = frozenset({REASK, NEGATIVE_REACTION, ESCALATION, HUMAN_TAKEOVER})
_CONFIRMING = frozenset({THANKED, POSITIVE_REACTION})
# A low score whose second opinion overturned it, or could not be had, does not fail the answer (as topics count).
_NOT_CONFIRMED = frozenset({ConfirmationStatus.DISPUTED, ConfirmationStatus.UNCONFIRMED})


@dataclass(frozen=True)
class AnswerSignals:
    """One answer as its tier needs it: when it was given, its outcome signals in the order they came (with how
    long after the answer each came, when known), and whether the judge failed it."""

    answered_at: datetime  # aware
    signals: tuple[str, ...] = ()
    after_seconds: Mapping[str, float] | None = None  # a signal's delay after the answer; a later one is ignored
    judged_failed: bool | None = None  # None: no usable verdict
    # The store's word on the window: closed (its sweep, or the bot's `resolution` signal), still watched (its own
    # end, set when it opened, may differ from today's window), or None: plain data, the clock decides.
    ended: bool | None = None


@dataclass(frozen=True)
class Resolution:
    tier: Tier
    reason: str | None = None  # `UNRESOLVED_REASONS` for unresolved, CONFIRMED / ASSUMED for resolved


def window_end(answered_at: datetime, window: timedelta) -> datetime:
    return answered_at + window


def is_open(answer: AnswerSignals, now: datetime, window: timedelta) -> bool:
    """Still inside its window: as the store says when it knows (`ended`), else up to and including the window's
    last second (as capture.outcomes.is_open)."""
    if answer.ended is not None:
        return not answer.ended
    return now <= window_end(answer.answered_at, window)


def _in_window(answer: AnswerSignals, window: timedelta) -> list[str]:
    """The signals that came within the window (the store records none later; a caller's plain data might)."""
    delays = answer.after_seconds or {}
    limit = window.total_seconds()
    return [name for name in answer.signals if delays.get(name) is None or delays[name] <= limit]


def resolution_of(answer: AnswerSignals, now: datetime, window: timedelta) -> Resolution:
    """The answer's tier at `now` with a window of `window` after the answer (module doc)."""
    if is_open(answer, now, window):
        return Resolution(OPEN)
    names = set(_in_window(answer, window))
    if ESCALATION in names:
        return Resolution(ESCALATED)
    if HUMAN_TAKEOVER in names:
        return Resolution(TEAMMATE)
    if REASK in names:
        return Resolution(UNRESOLVED, REASKED)
    if NEGATIVE_REACTION in names:
        return Resolution(UNRESOLVED, NEGATIVE)
    confirmed = bool(_CONFIRMING & names)
    if answer.ended is True and RESOLVED not in names and not (_AGAINST & names):
        # Every close in the store records `resolved` when nothing went against the answer, except the bot's
        # `resolution: unresolved`, which closes it with nothing.
        return Resolution(UNRESOLVED, ENDED_UNRESOLVED)
    if answer.judged_failed and not confirmed:
        return Resolution(UNRESOLVED, ABANDONED)
    return Resolution(RESOLVED_ALONE, CONFIRMED if confirmed else ASSUMED)


class Verdict(Protocol):
    """A current judgment as the reports' and the topics' rows carry it."""

    judge: str
    status: str
    score: float | None
    confirmation_status: str | None


def judged_failed(verdicts: Iterable[Verdict], thresholds: Mapping[str, float]) -> bool | None:
    """Whether the judge failed the answer: a score at or below its judge's threshold in the answer's channel that
    the second opinion did not overturn. None without a usable score of a judge with a threshold."""
    scored = False
    for verdict in verdicts:
        threshold = thresholds.get(verdict.judge)
        if verdict.status != JudgmentStatus.OK or verdict.score is None or threshold is None:
            continue
        scored = True
        if verdict.score <= threshold and verdict.confirmation_status not in _NOT_CONFIRMED:
            return True
    return False if scored else None
