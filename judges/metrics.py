"""Agreement between a judge and human labels: plain functions over lists of integer scores.

Used by `relmon eval` to tell a team whether to trust a judge: exact and within-one agreement, Cohen's kappa
with quadratic weights (chance-corrected; near disagreements cost less than far ones), Spearman's rank
correlation, and the confusion matrix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def exact_agreement(human: Sequence[int], judge: Sequence[int]) -> float | None:
    _check(human, judge)
    return sum(h == j for h, j in zip(human, judge, strict=True)) / len(human) if human else None


def within_one_agreement(human: Sequence[int], judge: Sequence[int]) -> float | None:
    _check(human, judge)
    return sum(abs(h - j) <= 1 for h, j in zip(human, judge, strict=True)) / len(human) if human else None


def confusion_matrix(human: Sequence[int], judge: Sequence[int], labels: Sequence[int]) -> list[list[int]]:
    """matrix[i][k]: how many items humans scored labels[i] and the judge scored labels[k]."""
    _check(human, judge)
    index = {label: position for position, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for h, j in zip(human, judge, strict=True):
        matrix[index[h]][index[j]] += 1
    return matrix


def quadratic_weighted_kappa(human: Sequence[int], judge: Sequence[int], labels: Sequence[int]) -> float | None:
    """Cohen's kappa with quadratic weights over the ordered `labels`. 1 is perfect agreement, 0 what chance
    gives, negative worse than chance. None when undefined (no items, or both raters always give one score)."""
    _check(human, judge)
    n = len(human)
    k = len(labels)
    if n == 0 or k < 2:
        return None
    observed = confusion_matrix(human, judge, labels)
    human_totals = [sum(row) for row in observed]
    judge_totals = [sum(observed[i][c] for i in range(k)) for c in range(k)]
    disagreement_observed = 0.0
    disagreement_expected = 0.0
    for i in range(k):
        for c in range(k):
            weight = (i - c) ** 2 / (k - 1) ** 2
            disagreement_observed += weight * observed[i][c]
            disagreement_expected += weight * human_totals[i] * judge_totals[c] / n
    if disagreement_expected == 0:
        return None
    return 1.0 - disagreement_observed / disagreement_expected


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks; tied values share the average of the ranks they span."""
    order = sorted(range(len(values)), key=lambda position: values[position])
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        average = (start + end) / 2 + 1
        for position in order[start : end + 1]:
            result[position] = average
        start = end + 1
    return result


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    _check(x, y)
    n = len(x)
    if n < 2:
        return None
    mean_x = sum(x) / n
    mean_y = sum(y) / n
    covariance = sum((a - mean_x) * (b - mean_y) for a, b in zip(x, y, strict=True))
    spread_x = sum((a - mean_x) ** 2 for a in x) ** 0.5
    spread_y = sum((b - mean_y) ** 2 for b in y) ** 0.5
    if spread_x == 0 or spread_y == 0:
        return None
    return covariance / (spread_x * spread_y)


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson over average ranks, so ties are handled). None when a side is
    constant or there are fewer than two items."""
    _check(x, y)
    return pearson(ranks(x), ranks(y))


@dataclass(frozen=True)
class Agreement:
    n: int
    exact: float | None
    within_one: float | None
    kappa: float | None
    spearman: float | None
    labels: list[int]
    confusion: list[list[int]]


def agreement(human: Sequence[int], judge: Sequence[int], labels: Sequence[int]) -> Agreement:
    return Agreement(
        n=len(human),
        exact=exact_agreement(human, judge),
        within_one=within_one_agreement(human, judge),
        kappa=quadratic_weighted_kappa(human, judge, labels),
        spearman=spearman(human, judge),
        labels=list(labels),
        confusion=confusion_matrix(human, judge, labels),
    )


def _check(x: Sequence[float], y: Sequence[float]) -> None:
    if len(x) != len(y):
        raise ValueError(f"the two raters scored different numbers of items ({len(x)} and {len(y)})")
