"""How far relmon's alerts can be trusted: pure figures over plain rows (`store.stats_queries.PairRow`) and the
canary's runs. The share of alerts people agreed with (with a 90% Wilson interval), the low scores a second
opinion disputed, the threshold the votes say would have been more precise, the canary's kappa, and whether
this week can be compared with the last at all (the same judge model and prompt version)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from common.feedback import Tally
from store.models import ConfirmationStatus, JudgmentStatus
from store.stats_queries import PairRow

Z_90 = 1.6448536269514722  # the normal quantile of a two-sided 90% interval
MIN_VOTES_FOR_SUGGESTION = 20
ThresholdsFor = Callable[[str | None], Mapping[str, float]]


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


def wilson(successes: int, total: int, z: float = Z_90) -> Interval | None:
    """The Wilson score interval of a proportion (90% by default); None without observations."""
    if total <= 0:
        return None
    p = successes / total
    denominator = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denominator
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denominator
    return Interval(max(0.0, centre - half), min(1.0, centre + half))


@dataclass(frozen=True)
class Precision:
    """Of the alerts people voted on: how many they agreed with (most voters said the judge was right)."""

    channel_id: str | None  # None: every channel
    judge: str
    agreed: int
    disagreed: int

    @property
    def alerts(self) -> Tally:
        """The voted alerts as a tally: agreed with (right) or not (wrong)."""
        return Tally(self.agreed, self.disagreed)

    @property
    def voted(self) -> int:
        return self.alerts.total

    @property
    def share(self) -> float | None:
        return self.alerts.agreement

    @property
    def interval(self) -> Interval | None:
        return wilson(self.agreed, self.voted)


@dataclass(frozen=True)
class Vote:
    """One voted alert: its channel, judge, score, and whether people agreed with it."""

    channel_id: str | None
    judge: str
    score: float
    agreed: bool


def voted_alerts(rows: Iterable[PairRow]) -> list[Vote]:
    """The judgments people voted on (the buttons are on alerts); a tie says nothing and is left out."""
    out = []
    for row in rows:
        for judgment in row.judgments:
            if judgment.score is None or judgment.votes_right == judgment.votes_wrong:
                continue
            out.append(
                Vote(row.channel_id, judgment.judge, judgment.score, judgment.votes_right > judgment.votes_wrong)
            )
    return out


def precision(votes: Iterable[Vote]) -> list[Precision]:
    """Per judge over every channel (channel None) and per channel and judge."""
    counts: dict[tuple[str | None, str], list[int]] = defaultdict(lambda: [0, 0])
    for vote in votes:
        for channel in (None, vote.channel_id):
            counts[(channel, vote.judge)][0 if vote.agreed else 1] += 1
    return [
        Precision(channel, judge, agreed, disagreed)
        for (channel, judge), (agreed, disagreed) in sorted(
            counts.items(), key=lambda item: (item[0][0] or "", item[0][1])
        )
    ]


@dataclass(frozen=True)
class Suggestion:
    channel_id: str | None
    judge: str
    current: float
    threshold: float
    precision_now: float
    precision_then: float
    votes: int


def suggest_threshold(
    pairs: Sequence[tuple[float, bool]], current: float, lowest: int, *, min_votes: int = MIN_VOTES_FOR_SUGGESTION
) -> tuple[float, float, float] | None:
    """From (score, agreed) of voted alerts: the stricter threshold whose alerts would have been more precise
    while still catching every answer people marked bad, as (threshold, its precision, today's precision); None
    with fewer than `min_votes` votes or when no threshold does better. Only stricter thresholds can be judged:
    nobody voted on the answers a laxer one would have added."""
    if len(pairs) < min_votes:
        return None

    def figures(threshold: float) -> tuple[float | None, int]:
        alerted = [agreed for score, agreed in pairs if score <= threshold]
        return (sum(alerted) / len(alerted) if alerted else None), sum(alerted)

    now, caught = figures(current)
    if now is None:
        return None
    best: tuple[float, float, float] | None = None
    for threshold in range(math.ceil(current) - 1, lowest - 1, -1):
        then, still_caught = figures(threshold)
        if then is None or still_caught < caught:
            continue
        if then > now and (best is None or then > best[1]):
            best = (float(threshold), then, now)
    return best


def suggestions(votes: Sequence[Vote], thresholds_for: ThresholdsFor, scales: Mapping[str, tuple[int, int]]) -> list:
    """A suggestion per channel and judge with enough votes whose threshold could be better."""
    groups: dict[tuple[str | None, str], list[tuple[float, bool]]] = defaultdict(list)
    for vote in votes:
        groups[(vote.channel_id, vote.judge)].append((vote.score, vote.agreed))
    out = []
    for (channel, judge), pairs in sorted(groups.items(), key=lambda item: (item[0][0] or "", item[0][1])):
        current = thresholds_for(channel).get(judge)
        if current is None:
            continue
        found = suggest_threshold(pairs, float(current), scales.get(judge, (0, 0))[0])
        if found is not None:
            threshold, precision_then, precision_now = found
            out.append(Suggestion(channel, judge, float(current), threshold, precision_now, precision_then, len(pairs)))
    return out


@dataclass(frozen=True)
class Disputed:
    pair_id: int
    channel_id: str | None
    judge: str
    score: float
    second_score: float | None


def second_opinions(rows: Iterable[PairRow]) -> tuple[list[Disputed], int, int]:
    """The low scores a second opinion disputed (with both scores), and how many were confirmed and unconfirmed."""
    disputed, confirmed, unconfirmed = [], 0, 0
    for row in rows:
        for judgment in row.judgments:
            status = judgment.confirmation_status
            if status == ConfirmationStatus.DISPUTED and judgment.score is not None:
                disputed.append(
                    Disputed(row.id, row.channel_id, judgment.judge, judgment.score, judgment.confirmation_score)
                )
            confirmed += status == ConfirmationStatus.CONFIRMED
            unconfirmed += status == ConfirmationStatus.UNCONFIRMED
    return disputed, confirmed, unconfirmed


@dataclass(frozen=True)
class CanaryPoint:
    """A canary run as the reports see it."""

    created_at: datetime
    judge: str
    model: str | None
    prompt_version: str | None
    kappa: float | None
    exact_agreement: float | None
    moved: str | None = None
    configured_model: str | None = None


@dataclass(frozen=True)
class CanaryFigures:
    latest: CanaryPoint
    previous: CanaryPoint | None

    @property
    def kappa_change(self) -> float | None:
        if self.previous is None or self.latest.kappa is None or self.previous.kappa is None:
            return None
        return self.latest.kappa - self.previous.kappa


def canary_figures(runs: Sequence[CanaryPoint]) -> CanaryFigures | None:
    """The newest run and the one before it (runs in any order)."""
    ordered = sorted(runs, key=lambda run: run.created_at, reverse=True)
    if not ordered:
        return None
    return CanaryFigures(ordered[0], ordered[1] if len(ordered) > 1 else None)


@dataclass(frozen=True)
class Comparability:
    """Whether one judge's figures this week may be set against last week's."""

    judge: str
    comparable: bool
    note: str | None = None


def judge_versions(rows: Iterable[PairRow], judge: str) -> set[tuple[str | None, str | None]]:
    """The (model, prompt version) pairs that scored answers for this judge."""
    return {
        (judgment.model, judgment.prompt_version)
        for row in rows
        for judgment in row.judgments
        if judgment.judge == judge and judgment.status == JudgmentStatus.OK and not judgment.cached
    }


def like_with_like(current: Iterable[PairRow], previous: Iterable[PairRow], judge: str) -> Comparability:
    """Weeks compare only across the same judge model and prompt version: a change during the week, or since
    the week before, is said and the change figures are left out."""
    now, before = judge_versions(current, judge), judge_versions(previous, judge)
    if len(now) > 1:
        models = sorted({model or "?" for model, _ in now})
        what = "model" if len(models) > 1 else "prompt"
        return Comparability(judge, False, f"the {judge} judge's {what} changed during the week ({', '.join(models)})")
    if now and before and now != before:
        ((model, _prompt),) = now
        was = sorted(before)[0]
        what = "model" if model != was[0] else "prompt"
        return Comparability(judge, False, f"the {judge} judge's {what} differs from last week's: not compared")
    return Comparability(judge, True)


@dataclass(frozen=True)
class Trust:
    precision: list[Precision] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)
    disputed: list[Disputed] = field(default_factory=list)
    confirmed: int = 0
    unconfirmed: int = 0
    canary: CanaryFigures | None = None
    comparability: dict[str, Comparability] = field(default_factory=dict)

    def comparable(self, judge: str) -> bool:
        found = self.comparability.get(judge)
        return found is None or found.comparable

    @property
    def notes(self) -> list[str]:
        return [c.note for c in self.comparability.values() if c.note]

    def precision_of(self, channel_id: str | None, judge: str) -> Precision | None:
        return next((p for p in self.precision if p.channel_id == channel_id and p.judge == judge), None)


def trust_report(
    current: Sequence[PairRow],
    previous: Sequence[PairRow],
    judges: Iterable[str],
    thresholds_for: ThresholdsFor,
    scales: Mapping[str, tuple[int, int]],
    canary_runs: Sequence[CanaryPoint] = (),
) -> Trust:
    votes = voted_alerts(current)
    disputed, confirmed, unconfirmed = second_opinions(current)
    return Trust(
        precision=precision(votes),
        suggestions=suggestions(votes, thresholds_for, scales),
        disputed=disputed,
        confirmed=confirmed,
        unconfirmed=unconfirmed,
        canary=canary_figures(canary_runs),
        comparability={judge: like_with_like(current, previous, judge) for judge in judges},
    )
