"""The agreement statistics of `relmon eval`, checked against values worked out by hand."""

from __future__ import annotations

import pytest

from judges.metrics import (
    agreement,
    confusion_matrix,
    exact_agreement,
    quadratic_weighted_kappa,
    ranks,
    spearman,
    within_one_agreement,
)

SCALE = [0, 1, 2, 3, 4]


def test_perfect_agreement() -> None:
    scores = [0, 1, 2, 3, 4, 4]
    result = agreement(scores, scores, SCALE)
    assert result.exact == 1.0 and result.within_one == 1.0
    assert result.kappa == pytest.approx(1.0)
    assert result.spearman == pytest.approx(1.0)


HUMAN, JUDGE = [4, 3, 2, 0], [4, 2, 4, 0]


def test_exact_agreement() -> None:
    assert exact_agreement(HUMAN, JUDGE) == 0.5
    assert exact_agreement([], []) is None


def test_within_one_agreement() -> None:
    assert within_one_agreement(HUMAN, JUDGE) == 0.75


def test_confusion_matrix_rows_are_human_columns_judge() -> None:
    matrix = confusion_matrix([0, 0, 2], [1, 1, 2], [0, 1, 2])
    assert matrix == [[0, 2, 0], [0, 0, 0], [0, 0, 1]]


def test_quadratic_kappa_by_hand() -> None:
    # Two raters on 0..2, four items: human [0, 1, 2, 2], judge [0, 2, 2, 1].
    # Observed (weights (i-j)^2/4): (1,2) and (2,1) disagree by one step: 2 * 0.25 = 0.5.
    # Marginals: human 0:1 1:1 2:2, judge 0:1 1:1 2:2; expected weighted disagreement =
    # sum_ij w_ij * h_i * j_j / 4 = [0.25*(1*1+1*1) + 1*(1*2+2*1) + 0.25*(1*2+2*1)] / 4 = (0.5 + 4 + 1) / 4
    kappa = quadratic_weighted_kappa([0, 1, 2, 2], [0, 2, 2, 1], [0, 1, 2])
    assert kappa == pytest.approx(1 - 0.5 / (5.5 / 4))


def test_kappa_is_negative_when_raters_disagree_systematically() -> None:
    assert quadratic_weighted_kappa([0, 4, 0, 4], [4, 0, 4, 0], SCALE) == pytest.approx(-1.0)


def test_kappa_undefined_when_both_raters_use_one_score() -> None:
    assert quadratic_weighted_kappa([3, 3, 3], [3, 3, 3], SCALE) is None
    assert quadratic_weighted_kappa([], [], SCALE) is None


def test_ranks_average_ties() -> None:
    assert ranks([10, 20, 20, 30]) == [1.0, 2.5, 2.5, 4.0]
    assert ranks([3, 1, 2]) == [3.0, 1.0, 2.0]


def test_spearman_by_hand() -> None:
    # Ranks x = [1, 2, 3, 4, 5], y = [2, 1, 4, 3, 5]: d^2 sums to 4, rho = 1 - 6*4 / (5*24) = 0.8.
    assert spearman([1, 2, 3, 4, 5], [5, 1, 8, 7, 9]) == pytest.approx(0.8)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)


def test_spearman_with_ties() -> None:
    # Pearson over average ranks: x ranks [1.5, 1.5, 3, 4], y ranks [1, 2, 3, 4].
    x_ranks, y_ranks = [1.5, 1.5, 3, 4], [1, 2, 3, 4]
    mean = 2.5
    cov = sum((a - mean) * (b - mean) for a, b in zip(x_ranks, y_ranks, strict=True))
    sx = sum((a - mean) ** 2 for a in x_ranks) ** 0.5
    sy = sum((b - mean) ** 2 for b in y_ranks) ** 0.5
    assert spearman([2, 2, 3, 4], [1, 2, 3, 4]) == pytest.approx(cov / (sx * sy))


def test_spearman_of_a_constant_or_single_input_is_none() -> None:
    assert spearman([2, 2, 2], [1, 2, 3]) is None
    assert spearman([1], [1]) is None


def test_mismatched_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="different numbers"):
        exact_agreement([1, 2], [1])
