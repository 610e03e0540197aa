"""A judge you can check: how far each judge agrees with the team, per channel and over every channel, fed plain rows
(`store.stats_queries.PairRow`) one at a time (counts and the few latest disagreements, never the rows).

A team label says whether an answer failed, in the team's eyes (docs/statistics.md):
- a vote on the judge's alert (`common.feedback`): most voters said the judge was right → the team's verdict is the
  judge's; most said it was wrong → the opposite; a tie says nothing;
- else the conversation, once its outcome window closed (`capture.outcomes`): `failed` (a re-ask confirmed by a
  teammate's reply, an escalation or a 👎, or "did not help" and a teammate stepping in) → failed; `resolved` →
  passed; anything else (a teammate's reply alone often adds to a right answer) → no label.

The judge's verdict is its score at or below the channel's alert threshold (failed) or above it (passed). Kappa is
Cohen's plain kappa of that pass/fail table (the team's labels are pass/fail, so there is no scale to weight), with
the failure rate corrected by the labels (`common.reports.kappa.ppi_failure_rate`). Under sampling (RELMON_SAMPLE)
the judge's failure rate over every judged answer is the weighted one, each answer 1/π (`common.reports.weighted`):
the judged answers hold every signalled one and only a share of the rest. Kappa's table is of the labelled answers
as they are (unweighted)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from capture.outcomes import failed
from common.reports.kappa import Corrected, Kappa, KappaFall, cohen_kappa, kappa_fall, ppi_failure_rate
from common.reports.weighted import Weights, weight_of
from store.models import JudgmentStatus
from store.sampling import probability_of
from store.signals import RESOLVED
from store.stats_queries import PairRow

VOTE, OUTCOME = "vote", "outcome"  # where a team label came from
DISAGREEMENTS_KEPT = 3  # the latest disagreements shown per judge and channel
ThresholdsFor = Callable[[str | None], Mapping[str, float]]


def team_label(row: PairRow, judge_failed: bool, votes_right: int, votes_wrong: int) -> tuple[bool, str] | None:
    """(the team failed the answer, where that came from), or None when the team said nothing of it."""
    if votes_right != votes_wrong:
        return (judge_failed if votes_right > votes_wrong else not judge_failed), VOTE
    if row.window_closed:
        if failed(row.signals):
            return True, OUTCOME
        if RESOLVED in row.signals:
            return False, OUTCOME
    return None


@dataclass(frozen=True)
class Disagreement:
    """An answer the judge and the team saw differently: where it is (a link, never its words) and who said what."""

    pair_id: int
    channel_id: str | None
    answer_ts: str | None
    judge: str
    score: float
    judge_failed: bool
    source: str  # VOTE or OUTCOME


@dataclass(frozen=True)
class JudgeAgreement:
    """One judge in one channel (None: every channel): the pass/fail table of its labelled answers, rows the judge
    (fail, pass) and columns the team (fail, pass), its kappa, and its failure rate corrected by the labels."""

    channel_id: str | None
    judge: str
    table: tuple[tuple[int, int], tuple[int, int]]
    kappa: Kappa
    corrected: Corrected
    votes: int = 0  # labels from votes
    outcomes: int = 0  # labels from outcomes
    disagreements: tuple[Disagreement, ...] = ()  # the latest first

    @property
    def labelled(self) -> int:
        return self.votes + self.outcomes


@dataclass(frozen=True)
class AgreementReport:
    """This week's agreement per (channel, judge), and last week's (for the fall)."""

    current: dict[tuple[str | None, str], JudgeAgreement] = field(default_factory=dict)
    previous: dict[tuple[str | None, str], JudgeAgreement] = field(default_factory=dict)

    def of(self, channel_id: str | None, judge: str) -> JudgeAgreement | None:
        return self.current.get((channel_id, judge))

    def fall(self, channel_id: str | None, judge: str) -> KappaFall | None:
        now, before = self.current.get((channel_id, judge)), self.previous.get((channel_id, judge))
        if now is None or before is None:
            return None
        return kappa_fall(before.kappa, now.kappa)

    def falls(self) -> list[tuple[JudgeAgreement, KappaFall]]:
        """Every (channel, judge) whose kappa fell significantly since last week: every channel's first; a channel
        whose labels are every channel's (the only one) is not said twice."""
        found = []
        for (channel, judge), now in sorted(self.current.items(), key=lambda item: (item[0][0] or "", item[0][1])):
            change = self.fall(channel, judge)
            overall = self.current.get((None, judge))
            if channel is not None and overall is not None and _same(now, overall):
                continue
            if change is not None and change.fell:
                found.append((now, change))
        return found


def _same(one: JudgeAgreement, other: JudgeAgreement) -> bool:
    return (one.table, one.corrected.judged, one.corrected.judge_failed) == (
        other.table,
        other.corrected.judged,
        other.corrected.judge_failed,
    )


class _Counts:
    def __init__(self) -> None:
        self.judged = self.judge_failed = self.votes = self.outcomes = 0
        self.table = [[0, 0], [0, 0]]
        self.disagreements: list[Disagreement] = []
        self.weights = Weights()  # each judged answer's 1/π (sampling): the judge's rate over them all

    def add(
        self, judge_failed: bool, label: tuple[bool, str] | None, disagreement: Disagreement | None, weight: float = 1.0
    ) -> None:
        self.judged += 1
        self.judge_failed += judge_failed
        self.weights.add(weight, hit=judge_failed)
        if label is None:
            return
        team_failed, source = label
        self.table[0 if judge_failed else 1][0 if team_failed else 1] += 1
        self.votes += source == VOTE
        self.outcomes += source == OUTCOME
        if disagreement is not None:
            self.disagreements.append(disagreement)
            del self.disagreements[:-DISAGREEMENTS_KEPT]  # rows come in id order: the newest are last

    def result(self, channel_id: str | None, judge: str) -> JudgeAgreement:
        table = ((self.table[0][0], self.table[0][1]), (self.table[1][0], self.table[1][1]))
        return JudgeAgreement(
            channel_id,
            judge,
            table,
            cohen_kappa(table),
            ppi_failure_rate(self.judged, self.judge_failed, table, weights=self.weights),
            self.votes,
            self.outcomes,
            tuple(reversed(self.disagreements)),
        )


class AgreementTally:
    """One week's judged answers (the caller feeds captured answers only, `tallies.is_answer`), counted per judge,
    over every channel and per channel."""

    def __init__(self, thresholds_for: ThresholdsFor) -> None:
        self.thresholds_for = thresholds_for
        self.counts: dict[tuple[str | None, str], _Counts] = {}

    def add(self, row: PairRow) -> None:
        thresholds = self.thresholds_for(row.channel_id) if row.judgments else {}
        weight = weight_of(probability_of(row.signals, row.inclusion_probability))
        for judgment in row.judgments:
            threshold = thresholds.get(judgment.judge)
            if judgment.status != JudgmentStatus.OK or judgment.score is None or threshold is None:
                continue
            judge_failed = judgment.score <= threshold
            label = team_label(row, judge_failed, judgment.votes_right, judgment.votes_wrong)
            disagreement = None
            if label is not None and label[0] != judge_failed:
                disagreement = Disagreement(
                    row.id, row.channel_id, row.answer_ts, judgment.judge, judgment.score, judge_failed, label[1]
                )
            places = (None,) if row.channel_id is None else (None, row.channel_id)
            for channel in places:
                counts = self.counts.get((channel, judgment.judge))
                if counts is None:
                    counts = self.counts[(channel, judgment.judge)] = _Counts()
                counts.add(judge_failed, label, disagreement, weight)

    def result(self) -> dict[tuple[str | None, str], JudgeAgreement]:
        return {key: counts.result(*key) for key, counts in self.counts.items()}
