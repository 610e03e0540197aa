"""Kappa with its interval and prediction-powered rates (common.reports.kappa), against scikit-learn and statsmodels,
and by simulation with a known truth; the weekly agreement tally over plain rows (common.reports.agreement)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import cohens_kappa

from common.reports.agreement import AgreementReport, AgreementTally, team_label
from common.reports.kappa import (
    MIN_LABELS,
    cohen_kappa,
    confusion,
    kappa_fall,
    ppi_failure_rate,
    ppi_mean,
)
from store.models import JudgmentStatus
from store.signals import ESCALATION, HUMAN_TAKEOVER, REASK, RESOLVED
from store.stats_queries import JudgmentRow, PairRow

SCALE = [1, 2, 3, 4, 5]


def _ordinal(seed: int, n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    first = rng.integers(1, 6, n)
    second = np.clip(first + rng.integers(-2, 3, n), 1, 5)
    return first, second


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kappa_matches_scikit_learn_and_its_error_matches_statsmodels(weights, seed):
    first, second = _ordinal(seed)
    table = confusion(list(zip(first.tolist(), second.tolist(), strict=True)), SCALE)
    found = cohen_kappa(table, weights)
    assert found.value == pytest.approx(cohen_kappa_score(first, second, weights=weights), abs=1e-12)
    reference = cohens_kappa(np.array(table), wt=weights) if weights else cohens_kappa(np.array(table))
    assert found.se == pytest.approx(reference.std_kappa, rel=1e-9)
    assert found.interval.low == pytest.approx(reference.kappa_low, rel=1e-9)
    assert found.interval.high == pytest.approx(reference.kappa_upp, rel=1e-9)
    assert found.n == len(first)


def test_plain_kappa_of_a_pass_fail_table():
    table = [[20, 5], [10, 65]]  # judge fail/pass × team fail/pass
    judge = [0] * 25 + [1] * 75
    team = [0] * 20 + [1] * 5 + [0] * 10 + [1] * 65
    found = cohen_kappa(table)
    assert found.value == pytest.approx(cohen_kappa_score(judge, team))
    assert found.se == pytest.approx(cohens_kappa(np.array(table)).std_kappa)
    assert found.enough


def test_kappa_undefined_or_too_few():
    assert cohen_kappa([[0, 0], [0, 0]]).value is None
    assert cohen_kappa([[12, 0], [0, 0]]).value is None  # both always said fail: chance explains it all
    small = cohen_kappa([[3, 1], [1, 4]])
    assert small.value is not None and small.n == 9 and not small.enough
    with pytest.raises(ValueError):
        cohen_kappa([[1, 2, 3], [1, 2, 3]])
    with pytest.raises(ValueError):
        cohen_kappa([[1, 0], [0, 1]], "cubic")  # type: ignore[arg-type]


def test_kappa_fall_needs_the_difference_interval_below_zero():
    good = cohen_kappa([[40, 3], [4, 53]])
    bad = cohen_kappa([[20, 23], [24, 33]])
    fall = kappa_fall(good, bad)
    assert fall is not None and fall.fell and fall.difference < 0
    assert not kappa_fall(good, cohen_kappa([[39, 4], [5, 52]])).fell  # noise
    assert not kappa_fall(bad, good).fell  # a rise is no fall
    assert kappa_fall(good, cohen_kappa([[3, 1], [1, 3]])) is None  # too few this week


def test_a_steady_judge_is_rarely_called_fallen():
    rng = np.random.default_rng(3)

    def week(n: int = 40):
        team = rng.random(n) < 0.3
        judge = np.where(team, rng.random(n) < 0.8, rng.random(n) < 0.1)
        return cohen_kappa(
            [
                [int((judge & team).sum()), int((judge & ~team).sum())],
                [int((~judge & team).sum()), int((~judge & ~team).sum())],
            ]
        )

    runs = 1000
    falls = sum(bool(found and found.fell) for found in (kappa_fall(week(), week()) for _ in range(runs)))
    assert falls / runs < 0.05


def test_ppi_mean_is_the_formula():
    predictions = [1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 1, 0]
    labelled = predictions[:10]
    labels = [1, 1, 0, 1, 0, 0, 1, 1, 0, 0]
    found = ppi_mean(predictions, labelled, labels)
    residuals = np.array(labels) - np.array(labelled)
    value = np.mean(predictions) + residuals.mean()
    se = np.sqrt(np.var(predictions, ddof=1) / len(predictions) + np.var(residuals, ddof=1) / len(labels))
    assert found.value == pytest.approx(value)
    assert found.interval.low == pytest.approx(value - 1.959963984540054 * se)
    assert found.n == 10
    assert ppi_mean(predictions, labelled[:3], labels[:3]).value is None  # too few labels
    with pytest.raises(ValueError):
        ppi_mean(predictions, labelled, labels[:2])


def _week(rng: np.random.Generator, truth: float, n: int, labels: int, *, alerts_first: bool = False):
    """A week of answers from a judge that misses half the failures and fails 5% of good answers; `labels` of them
    labelled by the team, at random or (`alerts_first`) votes on the judge's failures first, then outcomes."""
    failed = rng.random(n) < truth
    judge = np.where(failed, rng.random(n) < 0.5, rng.random(n) < 0.05)
    if alerts_first:
        chosen = np.concatenate([np.flatnonzero(judge)[: labels // 2], np.flatnonzero(~judge)[: labels // 2]])
    else:
        chosen = rng.choice(n, labels, replace=False)
    table = [[0, 0], [0, 0]]
    for i in chosen:
        table[0 if judge[i] else 1][0 if failed[i] else 1] += 1
    return judge, chosen, failed, table


def test_ppi_covers_the_true_rate_on_a_biased_judge_where_the_judge_rate_does_not():
    rng = np.random.default_rng(47)
    truth, runs = 0.20, 400
    plain = stratified = naive = 0
    for _ in range(runs):
        judge, chosen, failed, table = _week(rng, truth, 1000, 150)
        found = ppi_mean(judge.astype(float), judge[chosen].astype(float), failed[chosen].astype(float))
        plain += found.interval.low <= truth <= found.interval.high
        corrected = ppi_failure_rate(len(judge), int(judge.sum()), table).rate
        stratified += corrected.interval.low <= truth <= corrected.interval.high
        judge_rate = int(judge.sum()) / len(judge)
        half = 1.96 * np.sqrt(judge_rate * (1 - judge_rate) / len(judge))
        naive += judge_rate - half <= truth <= judge_rate + half
    assert 0.92 <= plain / runs <= 0.98
    assert 0.92 <= stratified / runs <= 0.99
    assert naive / runs < 0.05  # the judge's own rate, however sure of itself, misses the truth


def test_corrected_rate_stays_valid_when_labels_come_mostly_from_alerts():
    """Votes come only on the judge's failures: the plain residual over-corrects; weighting by verdict does not."""
    rng = np.random.default_rng(7)
    truth, runs = 0.20, 300
    covered = plain_covered = 0
    for _ in range(runs):
        judge, chosen, failed, table = _week(rng, truth, 1000, 60, alerts_first=True)
        corrected = ppi_failure_rate(len(judge), int(judge.sum()), table).rate
        covered += corrected.interval.low <= truth <= corrected.interval.high
        plain = ppi_mean(judge.astype(float), judge[chosen].astype(float), failed[chosen].astype(float))
        plain_covered += plain.interval.low <= truth <= plain.interval.high
    assert covered / runs >= 0.92
    assert plain_covered / runs < 0.5


def test_corrected_rate_says_too_few():
    assert ppi_failure_rate(100, 10, [[3, 1], [2, 3]]).rate.value is None  # 9 labels
    assert ppi_failure_rate(100, 10, [[12, 3], [0, 2]]).rate.value is None  # 2 on answers it passed
    assert ppi_failure_rate(100, 0, [[0, 0], [2, 10]]).rate.value is not None  # it failed none: that side unneeded
    found = ppi_failure_rate(200, 24, [[8, 2], [6, 24]])
    assert found.judge_rate == pytest.approx(0.12)
    assert found.rate.value == pytest.approx(0.12 * 0.8 + 0.88 * 0.2)
    assert 0 <= found.rate.low < found.rate.value < found.rate.high <= 1
    assert found.rate.n == 40
    with pytest.raises(ValueError):
        ppi_failure_rate(10, 11, [[0, 0], [0, 0]])


# The weekly tally over rows ------------------------------------------------------------------------------------

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def _row(pair_id: int, score: float, *, right=0, wrong=0, signals=(), closed=True, channel="C1") -> PairRow:
    judgment = JudgmentRow(
        pair_id, "relevancy", JudgmentStatus.OK, score, 4, score / 4, votes_right=right, votes_wrong=wrong
    )
    return PairRow(
        pair_id, channel, NOW, "judged", answer_ts=f"{pair_id}.0", judgments=(judgment,),
        window_closed=closed, signals=tuple(signals),
    )  # fmt: skip


def test_team_label_prefers_votes_then_outcomes():
    assert team_label(_row(1, 1), True, 2, 1) == (True, "vote")
    assert team_label(_row(1, 1), True, 0, 1) == (False, "vote")
    assert team_label(_row(1, 1, signals=[REASK, ESCALATION]), False, 1, 1) == (True, "outcome")
    assert team_label(_row(1, 1, signals=[RESOLVED]), True, 0, 0) == (False, "outcome")
    assert team_label(_row(1, 1, signals=[HUMAN_TAKEOVER]), True, 0, 0) is None  # a teammate's reply alone
    assert team_label(_row(1, 1, signals=[RESOLVED], closed=False), True, 0, 0) is None  # still open


def test_tally_counts_the_table_the_rate_and_the_latest_disagreements():
    tally = AgreementTally(lambda _channel: {"relevancy": 2})
    rows = [
        *(_row(i, 1, right=1) for i in range(1, 9)),  # judge fail, team agreed: fail/fail
        *(_row(i, 1, wrong=2) for i in range(9, 12)),  # judge fail, team said pass: fail/pass
        *(_row(i, 3, signals=[REASK, ESCALATION]) for i in range(12, 17)),  # judge pass, failed: pass/fail
        *(_row(i, 4, signals=[RESOLVED]) for i in range(17, 37)),  # pass/pass
        *(_row(i, 4, closed=False) for i in range(37, 100)),  # unlabelled
    ]
    for row in rows:
        tally.add(row)
    found = AgreementReport(tally.result()).of(None, "relevancy")
    assert found.table == ((8, 3), (5, 20))
    assert (found.votes, found.outcomes, found.labelled) == (11, 25, 36)
    judge = [0] * 11 + [1] * 25
    team = [0] * 8 + [1] * 3 + [0] * 5 + [1] * 20
    assert found.kappa.value == pytest.approx(cohen_kappa_score(judge, team))
    assert found.corrected.judged == 99 and found.corrected.judge_failed == 11
    assert found.corrected.rate.value == pytest.approx(11 / 99 * 8 / 11 + 88 / 99 * 5 / 25)
    assert [d.pair_id for d in found.disagreements] == [16, 15, 14]  # the latest first
    assert AgreementReport(tally.result()).of("C1", "relevancy").table == found.table
    assert found.labelled >= MIN_LABELS


def test_falls_name_the_judge_whose_agreement_fell():
    def tally(table):
        t = AgreementTally(lambda _channel: {"relevancy": 2})
        pair_id = 0
        for (low, right, wrong), count in table:
            for _ in range(count):
                pair_id += 1
                t.add(_row(pair_id, 1 if low else 3, right=right, wrong=wrong))
        return t.result()

    # Votes only: agreed alerts are fail/fail; "wrong" on a fail is fail/pass; on a pass (a vote on a high score)
    # "right" is pass/pass and "wrong" pass/fail.
    steady = tally([((True, 1, 0), 40), ((True, 0, 1), 3), ((False, 0, 1), 4), ((False, 1, 0), 53)])
    drifted = tally([((True, 1, 0), 20), ((True, 0, 1), 23), ((False, 0, 1), 24), ((False, 1, 0), 33)])
    falls = AgreementReport(drifted, steady).falls()
    assert [(a.channel_id, a.judge) for a, _ in falls] == [(None, "relevancy")]  # C1 is every channel: once
    assert AgreementReport(steady, steady).falls() == []
    assert AgreementReport(steady, {}).falls() == []
