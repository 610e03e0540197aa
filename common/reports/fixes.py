"""Whether a fix worked, pure: a topic's failure rate before and after it was marked fixed, and the verdict.

`verdict` is a plain function of the counts (failed, answers) before and after the mark, when the mark was made and
`now` (docs/statistics.md, "Fixes"); under sampling each side is the weights of its judged answers
(`common.reports.weighted.Weights`): the rates are then the Hájek shares, and the answers are counted at their
effective n:

- **improved**: the failure rate fell, significantly (Newcombe's interval of after − before below 0);
- **worse**: it rose, significantly;
- **not improved**: no significant change although the answers since the mark are enough to have shown the target
  improvement (a fall by `TARGET_REDUCTION` of the rate before, at 80% power) and a whole week has passed;
- **no evidence yet**: otherwise, with how many more answers are needed (`answers_needed`: the power of a
  two-proportion test at the rate before and the observed fall, or the target one when the observed is smaller).

The test set's items of the topic re-run against a new version (`relmon regress`) are given with the verdict
(`GoldenRerun`): a separate kind of evidence, shown beside it and never mixed into the rate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import NormalDist

from common.reports.intervals import CONFIDENCE, MIN_N, Shift, proportion_change, z_of
from common.reports.weighted import Weights, weighted_proportion_change

IMPROVED = "improved"
NO_EVIDENCE = "no_evidence"
NOT_IMPROVED = "not_improved"
WORSE = "worse"
OUTCOMES = (IMPROVED, NO_EVIDENCE, NOT_IMPROVED, WORSE)

POWER = 0.8  # the chance a fall of the target size is shown significant once the answers needed are in
TARGET_REDUCTION = 0.5  # the fall a fix is expected to make: half the failures (relative)
MIN_FOLLOW = timedelta(days=7)  # "not improved" only after a whole week: a weekday's traffic is not the week's

Counts = tuple[int, int]  # (failed, answers)
Side = Counts | Weights  # a side's counts, or its answers' weights 1/π under sampling


def _counts(side: Side) -> tuple[float, float]:
    """(failed, answers) of a side: a sampled side's at its effective n (the Hájek share times n_eff, n_eff)."""
    if isinstance(side, tuple):
        return side
    if not side.unequal:
        return round(side.hits), side.n
    n_eff = side.share_n
    return side.hits / side.total * n_eff, n_eff


def _shift(before: Side, after: Side) -> Shift:
    if isinstance(before, tuple) and isinstance(after, tuple):
        return proportion_change(before, after)
    weights = [side if isinstance(side, Weights) else Weights.of_share(*side) for side in (before, after)]
    return weighted_proportion_change(*weights)


@dataclass(frozen=True)
class GoldenRerun:
    """The topic's test-set items judged in a `relmon regress` run after the mark."""

    run_id: int
    passed: int
    total: int


@dataclass(frozen=True)
class FixVerdict:
    outcome: str  # one of OUTCOMES
    shift: Shift  # the failure rate before and after, each with its Wilson interval, and Newcombe's difference
    needed: int | None  # no evidence yet: more answers needed after the mark (None: the rate before cannot show it)
    wait_until: datetime | None = None  # no evidence yet, answers enough: the week after the mark ends then
    golden: GoldenRerun | None = None

    @property
    def key(self) -> str:
        """What a change of verdict is told by: the outcome (a new n needed is not a new verdict)."""
        return self.outcome


def sides(questions: Iterable[tuple[datetime, bool, float | None]], marked_at: datetime) -> tuple[Side, Side]:
    """Each side of the mark from the topic's questions (when the pair was made, failed, weight 1/π or None when
    sampling skipped it): (failed, answers) each; under sampling the weights of its judged questions, those skipped
    left out (whether they failed is not known)."""
    before, after = Weights(), Weights()
    skipped = False
    for made, failed, weight in questions:
        if weight is None:
            skipped = True
            continue
        (after if made >= marked_at else before).add(weight, hit=failed)
    if skipped or before.unequal or after.unequal:
        return before, after
    return (round(before.hits), before.n), (round(after.hits), after.n)


def cohens_h(p1: float, p2: float) -> float:
    """The arcsine distance of two proportions: the two-proportion test's effect size."""
    return 2 * math.asin(math.sqrt(p1)) - 2 * math.asin(math.sqrt(p2))


def answers_needed(
    before: tuple[float, float], p_after: float, *, confidence: float = CONFIDENCE, power: float = POWER
) -> int | None:
    """How many answers after the mark a two-sided two-proportion test (normal approximation on the arcsine
    scale, as statsmodels' NormalIndPower) needs to show `p_after` against the rate before at `power`, the answers
    before being fixed at their n. None when no n after can: the period before is too small, or no difference."""
    failed, n1 = before
    if n1 <= 0:
        return None
    h = abs(cohens_h(failed / n1, p_after))
    if h == 0:
        return None
    z = z_of(confidence) + NormalDist().inv_cdf(power)
    room = h * h / (z * z) - 1 / n1  # 1/n2 must fit in what the answers before leave of the variance budget
    if room <= 0:
        return None
    return math.ceil(1 / room)


def _no_evidence(shift: Shift, before: tuple[float, float], after: tuple[float, float], target: float) -> int | None:
    """More answers after the mark needed, at the observed fall or the target one, whichever is larger."""
    failed, n = after
    p_after = target if n == 0 else min(failed / n, target)
    needed = answers_needed(before, p_after)
    if needed is None:
        return None
    return max(math.ceil(needed - n), math.ceil(MIN_N - n), 1)


def verdict(
    before: Side,
    after: Side,
    *,
    marked_at: datetime,
    now: datetime,
    golden: GoldenRerun | None = None,
    target_reduction: float = TARGET_REDUCTION,
) -> FixVerdict:
    """The verdict on a fix marked at `marked_at`, from (failed, answers) before and after it, as of `now`."""
    if now < marked_at:
        raise ValueError("now is before the mark")
    if not 0 < target_reduction <= 1:
        raise ValueError("target_reduction must be in (0, 1]")
    shift = _shift(before, after)
    before, after = _counts(before), _counts(after)
    if shift.direction == "down":
        return FixVerdict(IMPROVED, shift, None, golden=golden)
    if shift.direction == "up":
        return FixVerdict(WORSE, shift, None, golden=golden)
    failed, n1 = before
    if n1 < MIN_N or failed == 0:  # too few before, or nothing failed to fix: nothing after can show a fall
        return FixVerdict(NO_EVIDENCE, shift, None, golden=golden)
    target = (failed / n1) * (1 - target_reduction)
    enough = answers_needed(before, target)
    if enough is not None and after[1] >= max(enough, MIN_N):
        if now - marked_at >= MIN_FOLLOW:
            return FixVerdict(NOT_IMPROVED, shift, None, golden=golden)
        return FixVerdict(NO_EVIDENCE, shift, 0, wait_until=marked_at + MIN_FOLLOW, golden=golden)
    return FixVerdict(NO_EVIDENCE, shift, _no_evidence(shift, before, after, target), golden=golden)
