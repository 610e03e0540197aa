"""A topic's figures, pure: questions, failed (and why), resolution rate, mean relevancy, and the change against
the week before; and what a period with too few questions to group says."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from capture.resolution import TIERS
from topics.questions import REASONS, Question


@dataclass(frozen=True)
class Figures:
    questions: int = 0
    failed: int = 0
    resolved: int = 0
    decided: int = 0  # questions whose outcome window closed (resolved or not)
    relevancy_total: float = 0.0
    relevancy_scored: int = 0
    reasons: dict[str, int] = field(default_factory=dict)  # failed questions per reason (one may have several)
    tiers: dict[str, int] = field(default_factory=dict)  # closed questions per resolution tier (capture.resolution)
    # Under sampling (RELMON_SAMPLE): the failure rate's sums over the questions whose failure is known (not skipped
    # by sampling), each weighing 1/π: `common.reports.weighted.Weights.as_json`'s n, total, squares, hits and
    # hit_squares (the estimate and its interval are common.reports.topics.failure_of's). None: the plain share.
    rate_weights: dict[str, float] | None = None

    @property
    def resolution_rate(self) -> float | None:
        return self.resolved / self.decided if self.decided else None

    @property
    def mean_relevancy(self) -> float | None:
        return self.relevancy_total / self.relevancy_scored if self.relevancy_scored else None

    @property
    def failure_rate(self) -> float | None:
        """Failed of questions; under sampling the Hájek share Σ wᵢyᵢ / Σ wᵢ of the questions judged."""
        if self.rate_weights is None:
            return self.failed / self.questions if self.questions else None
        total = self.rate_weights["total"]
        return self.rate_weights["hits"] / total if total else None

    def as_dict(self) -> dict:
        return {
            "questions": self.questions,
            "failed": self.failed,
            "failure_reasons": dict(self.reasons),
            "resolution_rate": self.resolution_rate,
            "resolved": self.resolved,
            "decided": self.decided,
            "mean_relevancy": self.mean_relevancy,
            "tiers": dict(self.tiers),
        }


def figures_of(questions: Iterable[Question]) -> Figures:
    count = failed = resolved = decided = scored = 0
    total = 0.0
    weights = {"n": 0, "total": 0.0, "squares": 0.0, "hits": 0.0, "hit_squares": 0.0}
    reasons: Counter[str] = Counter()
    tiers: Counter[str] = Counter()
    for question in questions:
        count += 1
        if (weight := question.weight) is not None:
            weights["n"] += 1
            weights["total"] += weight
            weights["squares"] += weight * weight
            if question.failed:
                weights["hits"] += weight
                weights["hit_squares"] += weight * weight
        if question.tier in TIERS:
            tiers[question.tier] += 1
        if question.failed:
            failed += 1
            reasons.update(question.failures)
        if question.resolved is not None:
            decided += 1
            resolved += question.resolved
        if question.relevancy is not None:
            scored += 1
            total += question.relevancy
    ordered = {reason: reasons[reason] for reason in REASONS if reasons[reason]}
    # Some weigh more, or were skipped: the plain share would be biased. (Equal weights: n·Σw² = (Σw)².)
    sampled = weights["n"] != count or not math.isclose(weights["total"] ** 2, count * weights["squares"])
    return Figures(
        count,
        failed,
        resolved,
        decided,
        total,
        scored,
        ordered,
        {tier: tiers[tier] for tier in TIERS},
        weights if sampled else None,
    )


def rank_key(figures: Figures) -> tuple:
    """What fixing a topic is worth: its failed questions first, then its failure rate, then its size."""
    return (-figures.failed, -(figures.failure_rate or 0.0), -figures.questions)


# From about this many questions a week's topics match a person's grouping (adjusted Rand index 0.64-0.72 at 250,
# 0.13-0.29 at 120, on the labelled corpus of 13 topics: `python -m bench.topics_size`, docs/topics.md).
RELIABLE_QUESTIONS = 250


def approximate_note(questions: int) -> str:
    """What a period grouped into topics, but with fewer questions than grouping is reliable for, says."""
    return (
        f"{questions} questions in this period: topics are a first cut below about {RELIABLE_QUESTIONS} questions "
        "(measured); the failed questions under each are what to read."
    )


def too_few_note(questions: int, needed: int) -> str:
    """What a period with too few questions to group says (its failed questions are listed apart)."""
    return (
        f"{questions} question{'s' if questions != 1 else ''} in this period: too few to group into topics "
        f"(needs {needed})."
    )
