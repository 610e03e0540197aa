"""How far relmon's alerts can be trusted: running tallies over plain rows (`store.stats_queries.PairRow`, fed one
at a time: counts, never the rows) and the canary's runs. The share of alerts people agreed with (with a 95%
Wilson interval, `common.reports.intervals`), the low scores a second opinion disputed, the threshold the votes
say would have been more precise, the canary's kappa, and whether this week can be compared with the last at all
(the same judge model and prompt version)."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from common.feedback import Tally
from common.reports.intervals import Estimate, Interval, proportion, wilson
from judges.names import JUDGE_NAMES
from store.models import ConfirmationStatus, JudgmentStatus
from store.stats_queries import PairRow

MIN_VOTES_FOR_SUGGESTION = 20
ThresholdsFor = Callable[[str | None], Mapping[str, float]]


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

    @property
    def estimate(self) -> Estimate:
        """The share agreed with, its n (voted alerts) and 95% Wilson interval."""
        return proportion(self.agreed, self.voted)


@dataclass(frozen=True)
class Vote:
    """One voted alert: its channel, judge, score, and whether people agreed with it."""

    channel_id: str | None
    judge: str
    score: float
    agreed: bool


def row_votes(row: PairRow) -> list[Vote]:
    """The judgments of this answer people voted on (the buttons are on alerts); a tie says nothing."""
    return [
        Vote(row.channel_id, judgment.judge, judgment.score, judgment.votes_right > judgment.votes_wrong)
        for judgment in row.judgments
        if judgment.score is not None and judgment.votes_right != judgment.votes_wrong
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


def suggest_from_counts(
    counts: Mapping[tuple[float, bool], int], current: float, lowest: int, *, min_votes: int = MIN_VOTES_FOR_SUGGESTION
) -> tuple[float, float, float] | None:
    """From how many voted alerts each (score, agreed) had: the stricter threshold whose alerts would have been
    more precise while still catching every answer people marked bad, as (threshold, its precision, today's
    precision); None with fewer than `min_votes` votes or when no threshold does better. Only stricter thresholds
    can be judged: nobody voted on the answers a laxer one would have added."""
    if sum(counts.values()) < min_votes:
        return None

    def figures(threshold: float) -> tuple[float | None, int]:
        alerted = agreed_with = 0
        for (score, agreed), count in counts.items():
            if score <= threshold:
                alerted += count
                agreed_with += count if agreed else 0
        return (agreed_with / alerted if alerted else None), agreed_with

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


def _by_place(item: tuple[tuple[str | None, str], object]) -> tuple[str, str]:
    (channel, judge), _ = item
    return channel or "", judge


class VoteTally:
    """Voted alerts so far, counted per channel and judge, and per score and verdict (what a threshold
    suggestion weighs): as many counts as the scales have scores, however many votes."""

    def __init__(self, votes: Iterable[Vote] = ()) -> None:
        self.counts: dict[tuple[str | None, str], list[int]] = defaultdict(lambda: [0, 0])
        self.scores: dict[tuple[str | None, str], Counter[tuple[float, bool]]] = defaultdict(Counter)
        for vote in votes:
            self.add(vote)

    def add(self, vote: Vote) -> None:
        for channel in (None, vote.channel_id):
            self.counts[(channel, vote.judge)][0 if vote.agreed else 1] += 1
        self.scores[(vote.channel_id, vote.judge)][(vote.score, vote.agreed)] += 1

    def precision(self) -> list[Precision]:
        """Per judge over every channel (channel None) and per channel and judge."""
        return [
            Precision(channel, judge, agreed, disagreed)
            for (channel, judge), (agreed, disagreed) in sorted(self.counts.items(), key=_by_place)
        ]

    def suggestions(self, thresholds_for: ThresholdsFor, scales: Mapping[str, tuple[int, int]]) -> list[Suggestion]:
        """A suggestion per channel and judge with enough votes whose threshold could be better."""
        out = []
        for (channel, judge), counts in sorted(self.scores.items(), key=_by_place):
            current = thresholds_for(channel).get(judge)
            if current is None:
                continue
            found = suggest_from_counts(counts, float(current), scales.get(judge, (0, 0))[0])
            if found is not None:
                threshold, precision_then, precision_now = found
                votes = sum(counts.values())
                out.append(Suggestion(channel, judge, float(current), threshold, precision_now, precision_then, votes))
        return out


def precision(votes: Iterable[Vote]) -> list[Precision]:
    """Per judge over every channel (channel None) and per channel and judge."""
    return VoteTally(votes).precision()


@dataclass(frozen=True)
class Disputed:
    pair_id: int
    channel_id: str | None
    judge: str
    score: float
    second_score: float | None


DISPUTED_SHOWN = 3  # the disputed low scores the trust lines show with both scores; the rest are counted


class SecondOpinionTally:
    """The low scores a second opinion disputed (the first `keep` with both scores, all counted), and how many
    were confirmed and unconfirmed."""

    def __init__(self, keep: int | None = DISPUTED_SHOWN) -> None:
        self.keep = keep
        self.disputed: list[Disputed] = []
        self.more_disputed = self.confirmed = self.unconfirmed = 0

    def add(self, row: PairRow) -> None:
        for judgment in row.judgments:
            status = judgment.confirmation_status
            if status == ConfirmationStatus.DISPUTED and judgment.score is not None:
                if self.keep is None or len(self.disputed) < self.keep:
                    self.disputed.append(
                        Disputed(row.id, row.channel_id, judgment.judge, judgment.score, judgment.confirmation_score)
                    )
                else:
                    self.more_disputed += 1
            self.confirmed += status == ConfirmationStatus.CONFIRMED
            self.unconfirmed += status == ConfirmationStatus.UNCONFIRMED


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


Version = tuple[str | None, str | None]  # (model, prompt version)
Versions = set[Version]


@dataclass(frozen=True)
class VersionChange:
    """What changed between or within the compared weeks, for the reader (`common.messages.versions` words it):
    this week's versions in the order they began (with when), and last week's."""

    what: str  # "model" or "prompt"
    now: tuple[tuple[Version, datetime | None], ...]
    before: tuple[Version, ...]

    @property
    def during(self) -> bool:
        return len(self.now) > 1


def team_canaries(runs: Sequence[CanaryPoint]) -> dict[str, CanaryFigures]:
    """Each team judge's newest run and the one before it (the seed judges' are `canary_figures`)."""
    names = sorted({run.judge for run in runs if run.judge not in JUDGE_NAMES})
    found = {name: canary_figures([run for run in runs if run.judge == name]) for name in names}
    return {name: figures for name, figures in found.items() if figures is not None}


@dataclass(frozen=True)
class Comparability:
    """Whether one judge's figures this week may be set against last week's."""

    judge: str
    comparable: bool
    note: str | None = None
    change: VersionChange | None = field(default=None, compare=False)


class VersionTally:
    """The (model, prompt version) pairs that scored answers so far, per judge, with the first answer each judged
    (by the pair's time)."""

    def __init__(self) -> None:
        self.versions: dict[str, dict[Version, datetime]] = defaultdict(dict)

    def add(self, row: PairRow) -> None:
        for judgment in row.judgments:
            if judgment.status == JudgmentStatus.OK and not judgment.cached:
                seen = self.versions[judgment.judge]
                key = (judgment.model, judgment.prompt_version)
                if key not in seen or row.created_at < seen[key]:
                    seen[key] = row.created_at

    def of(self, judge: str) -> Versions:
        return set(self.versions.get(judge, {}))

    def first_seen(self, judge: str) -> dict[Version, datetime]:
        return dict(self.versions.get(judge, {}))


def comparability(
    judge: str, now: Versions, before: Versions, since: Mapping[Version, datetime] | None = None
) -> Comparability:
    """Weeks compare only across the same judge model and prompt version: a change during the week, or since
    the week before, is said and the change figures are left out. `since`: when each of this week's versions
    judged its first answer (what the reader is told)."""
    since = since or {}
    if len(now) > 1:
        models = sorted({model or "?" for model, _ in now})
        what = "model" if len(models) > 1 else "prompt"
        note = f"the {judge} judge's {what} changed during the week ({', '.join(models)})"
        return Comparability(judge, False, note, _change(what, now, before, since))
    if now and before and now != before:
        ((model, _prompt),) = now
        was = sorted(before, key=_version_order)[0]
        what = "model" if model != was[0] else "prompt"
        note = f"the {judge} judge's {what} differs from last week's: not compared"
        return Comparability(judge, False, note, _change(what, now, before, since))
    return Comparability(judge, True)


def _version_order(version: Version) -> tuple[str, str]:
    return version[0] or "", version[1] or ""


def _change(what: str, now: Versions, before: Versions, since: Mapping[Version, datetime]) -> VersionChange:
    started = sorted(now, key=lambda v: (since[v].timestamp() if v in since else 0.0, _version_order(v)))
    return VersionChange(what, tuple((v, since.get(v)) for v in started), tuple(sorted(before, key=_version_order)))


@dataclass(frozen=True)
class Trust:
    precision: list[Precision] = field(default_factory=list)
    suggestions: list[Suggestion] = field(default_factory=list)
    disputed: list[Disputed] = field(default_factory=list)  # the first few (`DISPUTED_SHOWN`)
    more_disputed: int = 0  # the disputed ones beyond those
    confirmed: int = 0
    unconfirmed: int = 0
    canary: CanaryFigures | None = None  # the seed canary's
    comparability: dict[str, Comparability] = field(default_factory=dict)
    # Each team judge's canary (a judges.d judge with a labelled file), by name.
    team_canaries: dict[str, CanaryFigures] = field(default_factory=dict)
    # judge -> prompt version -> its number (1 the first the store holds), read when a version changed
    # (`store.judgments.prompt_numbers`); not compared: how a version is named, not a figure.
    version_numbers: Mapping[str, Mapping[str, int]] = field(default_factory=dict, compare=False)

    @property
    def disputed_count(self) -> int:
        return len(self.disputed) + self.more_disputed

    def comparable(self, judge: str) -> bool:
        found = self.comparability.get(judge)
        return found is None or found.comparable

    @property
    def notes(self) -> list[str]:
        return [c.note for c in self.comparability.values() if c.note]

    def precision_of(self, channel_id: str | None, judge: str) -> Precision | None:
        return next((p for p in self.precision if p.channel_id == channel_id and p.judge == judge), None)


class TrustTally:
    """The trust figures so far: votes and second opinions on this week's answers, the judges' versions of this
    week and the week before (the canary's runs come whole: the two newest)."""

    def __init__(self) -> None:
        self.votes = VoteTally()
        self.second = SecondOpinionTally()
        self.versions, self.previous_versions = VersionTally(), VersionTally()

    def add_current(self, row: PairRow) -> None:
        for vote in row_votes(row):
            self.votes.add(vote)
        self.second.add(row)
        self.versions.add(row)

    def add_previous(self, row: PairRow) -> None:
        self.previous_versions.add(row)

    def trust(
        self,
        judges: Iterable[str],
        thresholds_for: ThresholdsFor,
        scales: Mapping[str, tuple[int, int]],
        canary_runs: Sequence[CanaryPoint] = (),
    ) -> Trust:
        second = self.second
        return Trust(
            precision=self.votes.precision(),
            suggestions=self.votes.suggestions(thresholds_for, scales),
            disputed=list(second.disputed),
            more_disputed=second.more_disputed,
            confirmed=second.confirmed,
            unconfirmed=second.unconfirmed,
            canary=canary_figures([run for run in canary_runs if run.judge in JUDGE_NAMES]),
            team_canaries=team_canaries(canary_runs),
            comparability={
                judge: comparability(
                    judge,
                    self.versions.of(judge),
                    self.previous_versions.of(judge),
                    self.versions.first_seen(judge),
                )
                for judge in judges
            },
        )
