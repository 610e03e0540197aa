"""The reports sampling's first pass left unweighted (docs/statistics.md, "Sampled answers"): the topics' failure
rates, the fixes' before/after rates and the judge's failure rate in the agreement figures, on a simulated week at
RELMON_SAMPLE=0.3 where signalled answers fail far more often than the rest: the plain figure is biased, the one
shown is not. (The change and degradation alerts' uniform subsample: tests/integration/test_sampling_judging.py.)"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from common.reports.agreement import AgreementTally
from common.reports.fixes import sides, verdict
from common.reports.intervals import proportion
from common.reports.topics import failure_change, failure_of, rate_weights_of
from store import topics as topic_rows
from store.signals import NEGATIVE_REACTION, REASK
from tests.stats_rows import NOW, pair, thresholds_for
from tests.stats_rows import verdict as judgment
from topics.figures import figures_of
from topics.service import question_of
from workers import sampling

RATE = 0.3
SIGNALLED_SHARE, SIGNALLED_FAILS, QUIET_FAILS = 0.15, 0.7, 0.08


def _week(seed: int, answers: int = 2_100, *, at=NOW):
    """A week's answers as stored at RATE, and the truth: (rows, judge failed each, signalled each). Every signalled
    answer is judged (probability 1), the rest when their hashed point is below RATE (probability kept)."""
    rng = np.random.default_rng(seed)
    signalled = rng.random(answers) < SIGNALLED_SHARE
    bad = np.where(signalled, rng.random(answers) < SIGNALLED_FAILS, rng.random(answers) < QUIET_FAILS)
    rows = []
    for i in range(answers):
        made = at - timedelta(minutes=i)
        # The message's ts fixed by the seed: sampling hashes it, and `pair` numbers rows in the order tests run.
        row = replace(pair(at=made), answer_ts=f"{1_700_000_000 + seed}.{i:06d}")
        probability = sampling.inclusion_probability(RATE, source="capture", signalled=bool(signalled[i]))
        if not sampling.chosen(sampling.sample_point(row.channel_id, row.answer_ts), probability):
            rows.append(replace(row, status="skipped_sampling"))
            continue
        signals = (REASK, NEGATIVE_REACTION) if signalled[i] else ()
        stored = None if probability >= 1 else probability
        rows.append(
            replace(row, judgments=(judgment(1 if bad[i] else 4),), signals=signals, inclusion_probability=stored)
        )
    return rows, bad, signalled


def _questions(rows):
    text = topic_rows.QuestionText("How do I reset my password?", None, None)
    return [question_of(row, text, thresholds_for(row.channel_id)) for row in rows]


def test_a_topics_failure_rate_is_weighted_and_the_plain_share_is_not():
    rows, bad, signalled = _week(seed=3)
    truth = float(np.mean(bad | signalled))  # topics count a signalled answer failed, whatever the judge said
    figures = figures_of(_questions(rows))
    plain = proportion(figures.failed, figures.questions)  # a skipped answer read as not failed
    shown = failure_of(figures)
    assert figures.questions == len(rows) and figures.rate_weights is not None
    assert not plain.low <= truth <= plain.high and plain.value < truth - 0.03
    assert shown.low <= truth <= shown.high and abs(shown.value - truth) < 0.02
    assert figures.failure_rate == pytest.approx(shown.value)  # what the ranking reads
    assert shown.n == sum(row.status == "judged" for row in rows)  # the judged n; its interval at n_eff
    assert shown.effective_n == pytest.approx(rate_weights_of(figures).share_n)
    # Without sampling nothing changes: every question weighs 1, the plain share.
    unsampled = figures_of(_questions([replace(r, status="judged", inclusion_probability=None) for r in rows]))
    assert unsampled.rate_weights is None and failure_of(unsampled) == proportion(unsampled.failed, len(rows))


def test_a_stored_runs_weights_give_the_same_rate_and_change():
    from types import SimpleNamespace

    from common.reports.topics import stored_view
    from topics.service import _weights_json

    now, before = figures_of(_questions(_week(seed=4)[0])), figures_of(_questions(_week(seed=5)[0]))
    period = SimpleNamespace(
        topic_key="k",
        name="Passwords",
        name_sources=[],
        questions=now.questions,
        failed=now.failed,
        resolved=0,
        decided=0,
        tiers={},
        mean_relevancy=None,
        previous_questions=before.questions,
        previous_failed=before.failed,
        channels=["C1"],
        private_channels=[],
        only_private=False,
        examples=[],
        rate_weights=_weights_json(now),
        previous_rate_weights=_weights_json(before),
    )
    run = SimpleNamespace(questions=now.questions, left_out=0, embedding="local", notes=[])
    (line,) = stored_view(run, [period], {}, audience_sees=lambda _c: True, may_quote=lambda _c, _p: True).topics
    assert failure_of(line.figures) == failure_of(now)
    assert failure_change(line.previous, line.figures) == failure_change(before, now)


def test_a_fixs_before_and_after_rates_are_weighted():
    """A fix that changed nothing, on a topic sampled at 0.3: each side's rate is the traffic's, not the judged
    answers' (which over-represent the signalled ones) nor the plain share of all (which reads a skipped one as
    passed)."""
    marked = NOW - timedelta(days=7)
    after_rows, after_bad, after_signalled = _week(seed=6, at=NOW)
    before_rows, before_bad, before_signalled = _week(seed=7, at=marked - timedelta(minutes=1))
    rows = before_rows + after_rows
    questions = _questions(rows)
    found = sides([(row.created_at, q.failed, q.weight) for row, q in zip(rows, questions, strict=True)], marked)
    shift = verdict(*found, marked_at=marked, now=NOW).shift
    for estimate, bad, signalled, side in (
        (shift.before, before_bad, before_signalled, questions[: len(before_rows)]),
        (shift.after, after_bad, after_signalled, questions[len(before_rows) :]),
    ):
        truth = float(np.mean(bad | signalled))
        assert estimate.low <= truth <= estimate.high
        plain = proportion(sum(q.failed for q in side), len(side))
        assert not plain.low <= truth <= plain.high
    assert shift.direction == "none"
    # Unsampled sides stay plain counts (the verdict as before).
    plain_rows = [replace(r, status="judged", inclusion_probability=None) for r in rows]
    pairs = zip(plain_rows, _questions(plain_rows), strict=True)
    counted = sides([(r.created_at, q.failed, q.weight) for r, q in pairs], marked)
    assert all(isinstance(side, tuple) for side in counted)


def test_the_judges_failure_rate_in_the_agreement_is_weighted():
    rows, bad, _signalled = _week(seed=8)
    truth = float(np.mean(bad))  # the judge fails an answer scored 1 (threshold 2)
    tally = AgreementTally(thresholds_for)
    for row in rows:
        tally.add(row)
    corrected = tally.result()[(None, "relevancy")].corrected
    plain = corrected.judge_failed / corrected.judged
    assert plain > truth + 0.1  # the judged answers hold every signalled one
    assert abs(corrected.judge_rate - truth) < 0.02
    # Sampling off: the plain share, as before.
    plain_tally = AgreementTally(thresholds_for)
    for row in rows:
        if row.judgments:
            plain_tally.add(replace(row, signals=(), inclusion_probability=None))
    unsampled = plain_tally.result()[(None, "relevancy")].corrected
    assert unsampled.weighted_rate is None and unsampled.judge_rate == unsampled.judge_failed / unsampled.judged


def test_the_corrected_rate_weighs_the_judges_verdicts_by_the_weighted_shares():
    from common.reports.kappa import ppi_failure_rate
    from common.reports.weighted import Weights

    table = ((20, 5), (4, 40))  # judge fail: 20 team fail, 5 pass; judge pass: 4 team fail, 40 pass
    weights = Weights()
    for _ in range(60):
        weights.add(1.0, hit=True)  # 60 signalled answers the judge failed, certain
    for i in range(120):
        weights.add(1 / RATE, hit=i < 12)  # 120 sampled at 0.3, 12 failed
    found = ppi_failure_rate(180, 72, table, weights=weights)
    share = (60 + 12 / RATE) / (60 + 120 / RATE)
    assert found.judge_rate == pytest.approx(share)
    assert found.rate.value == pytest.approx(share * 20 / 25 + (1 - share) * 4 / 44)
    assert ppi_failure_rate(180, 72, table).rate.value == pytest.approx(0.4 * 20 / 25 + 0.6 * 4 / 44)
