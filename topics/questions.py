"""A period's questions as the topics see them: plain data, and why a question counts as failed.

A question failed when any of these says so (`failure_reasons`): a low score the second opinion did not overturn
(`low_score`), the conversation failed though the judge scored it well (`missed_failure`, capture.outcomes.failed),
the asker asked again (`reask`), asked for a human (`escalation`), a teammate stepped in (`human_takeover`), a 👎
(`negative_reaction`), or the grounded judge found no document that answers it (`no_document`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime

from capture.outcomes import failed as conversation_failed
from judges.names import GROUNDED
from store.models import ConfirmationStatus, JudgmentStatus
from store.signals import ESCALATION, HUMAN_TAKEOVER, NEGATIVE_REACTION, REASK, RESOLVED

LOW_SCORE = "low_score"
MISSED_FAILURE = "missed_failure"
NO_DOCUMENT = "no_document"
REASONS = (LOW_SCORE, MISSED_FAILURE, REASK, ESCALATION, HUMAN_TAKEOVER, NEGATIVE_REACTION, NO_DOCUMENT)
_SIGNAL_REASONS = (REASK, ESCALATION, HUMAN_TAKEOVER, NEGATIVE_REACTION)
# A second opinion that overturned the low score, or could not be had: not a confirmed low score.
_NOT_CONFIRMED = frozenset({ConfirmationStatus.DISPUTED, ConfirmationStatus.UNCONFIRMED})


@dataclass(frozen=True)
class CurrentJudgment:
    """One current judgment of the question's answer, as far as topics care."""

    judge: str
    status: str  # ok | null | error
    score: float | None = None
    confirmation_status: str | None = None


@dataclass(frozen=True)
class Question:
    """One captured question and what became of its answer."""

    pair_id: int
    channel_id: str | None
    ts: str | None  # the question's message ts (the answer's when the question has none): with the channel, its id
    text: str
    created_at: datetime
    private: bool = False
    failures: tuple[str, ...] = ()  # `REASONS` that apply, in that order; empty: not failed
    resolved: bool | None = None  # its outcome window closed resolved (True) or not (False); None: not decided
    relevancy: float | None = None  # the relevancy judge's score (0–4), if it scored
    teammate_answer: str | None = None  # the teammate's reply in the thread after the bot failed
    tier: str | None = None  # its resolution tier (capture.resolution), `open` inside its window; None: not watched
    # Its weight in the failure rate, 1/π (sampling, common.reports.weighted); None: skipped by sampling, so whether
    # it failed is not known (it is counted among the questions, not in the rate).
    weight: float | None = 1.0

    @property
    def failed(self) -> bool:
        return bool(self.failures)

    @property
    def no_document(self) -> bool:
        return NO_DOCUMENT in self.failures


def failure_reasons(
    verdicts: Collection[CurrentJudgment], signals: Collection[str], thresholds: Mapping[str, float]
) -> tuple[str, ...]:
    """Why a question counts as failed (empty: it did not). `thresholds`: each judge's alert threshold in its
    channel (a score at or below it is low)."""
    found: set[str] = set()
    low = False
    for verdict in verdicts:
        if verdict.judge == GROUNDED and verdict.status == JudgmentStatus.NULL:
            found.add(NO_DOCUMENT)
        threshold = thresholds.get(verdict.judge)
        if verdict.status != JudgmentStatus.OK or verdict.score is None or threshold is None:
            continue
        if verdict.score <= threshold and verdict.confirmation_status not in _NOT_CONFIRMED:
            low = True
    if low:
        found.add(LOW_SCORE)
    names = set(signals)
    found |= names & set(_SIGNAL_REASONS)
    if not low and verdicts and conversation_failed(names):
        found.add(MISSED_FAILURE)  # judged, scored well, and the conversation says it failed
    return tuple(reason for reason in REASONS if reason in found)


def resolution(signals: Collection[str], window_closed: bool | None) -> bool | None:
    """Resolved (True), not resolved (False), or not decided yet (None: its window is open or was never watched)."""
    if not window_closed:
        return None
    return RESOLVED in signals
