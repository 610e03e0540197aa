"""`relmon regress`'s rules, plain functions over plain data: what each judge's verdict means for a candidate
answer, an item's outcome, the two orders of the grounded judge, the pass rate's interval, and the comparison with
a baseline run.

Per item, four checks: relevancy (the candidate answers the question: a score above the alert threshold),
correctness against the expected answer (2, "correct"), and the grounded judge twice: the expected answer as
answer 1 and the candidate as answer 2, then swapped. In each order the candidate passes when its grade is at
least 4 or at least the expected answer's; an item whose two orders disagree is *uncertain* (position bias, as
LangSmith's `randomize_order` and DeepEval's Arena guard against), not averaged into a pass or a fail.

A team's own judges (`relmon regress --judge NAME`, judges.d) add a check each: the candidate judged against the
expected answer (its `{reference}`), failing the item at or below the judge's `fails_at`. A pair without a text the
judge needs (`{documents}`: a golden item has none) is not judged by it, and the item says so."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from judges.grounded import GroundedAnswer
from judges.names import CORRECTNESS, GROUNDED, RELEVANCY
from judges.parsing import UnparseableReply, extract_json_object, validate

# The four checks: one per judge, and the grounded judge's second order.
GROUNDED_SWAPPED = f"{GROUNDED}_swapped"
CHECKS = (RELEVANCY, CORRECTNESS, GROUNDED, GROUNDED_SWAPPED)
JUDGE_OF_CHECK = {RELEVANCY: RELEVANCY, CORRECTNESS: CORRECTNESS, GROUNDED: GROUNDED, GROUNDED_SWAPPED: GROUNDED}
PASS, FAIL, UNCERTAIN, ERROR = "pass", "fail", "uncertain", "error"
MISSING = "missing"  # a golden item the candidates file has no answer for: not run
IMPROVED, REGRESSED, NEW = "improved", "regressed", "new"
GROUNDED_GOOD = 4  # "good relevancy" on the grounded judge's 1–5 scale


def check_texts(check: str, question: str, answer: str, expected: str | None) -> tuple[str, str, str | None]:
    """(question, answer, reference) a check's judge reads: the swapped grounded check grades the expected answer
    as answer 2 against the candidate as answer 1."""
    if check == RELEVANCY:
        return question, answer, None
    if check == GROUNDED_SWAPPED:
        return question, expected or "", answer
    return question, answer, expected


def grounded_answers(raw_output: str | None) -> tuple[GroundedAnswer, GroundedAnswer] | None:
    """(answer 1, answer 2) as the grounded judge graded them, or None when its reply cannot be read."""
    try:
        data = extract_json_object(raw_output or "")
        return validate(GroundedAnswer, data["answer_1"]), validate(GroundedAnswer, data["answer_2"])
    except (UnparseableReply, KeyError, TypeError):
        return None


def grounded_grade(graded: GroundedAnswer) -> int | None:
    """An answer's grade, None when it says no document answers the question (whatever grade came with it)."""
    return None if graded.answer_affirms_no_document_answers else graded.answer_relevancy


def grounded_grades(raw_output: str | None) -> tuple[int | None, int | None] | None:
    """(answer 1's grade, answer 2's grade) from the grounded judge's reply (None for "no document"), or None
    when the reply cannot be read."""
    answers = grounded_answers(raw_output)
    if answers is None:
        return None
    return grounded_grade(answers[0]), grounded_grade(answers[1])


def grounded_order(candidate: int | None, expected: int | None) -> str:
    """One order's outcome: the candidate is as relevant as the expected answer, or good in itself."""
    if candidate is None:
        return FAIL  # "no document answers": the new version did not answer a question it should
    return PASS if candidate >= GROUNDED_GOOD or expected is None or candidate >= expected else FAIL


@dataclass
class ItemResult:
    key: str
    outcome: str  # pass | fail | uncertain | error
    scores: dict[str, Any] = field(default_factory=dict)  # per judge, for the table
    failed_by: list[str] = field(default_factory=list)  # judges that failed it
    notes: list[str] = field(default_factory=list)
    change: str | None = None  # improved | regressed | new | None (same), against the baseline


def item_result(
    key: str,
    verdicts: Mapping[str, Mapping[str, Any]],
    *,
    relevancy_threshold: float,
    team: Mapping[str, float] | None = None,
) -> ItemResult:
    """An item's outcome from its four verdicts (plain dicts: status, score, raw_output, error) and its team judges'
    (`team`: name → the score at or below which it fails)."""
    result = ItemResult(key, PASS)
    errors = [check for check in CHECKS if verdicts[check].get("status") in ("error", "empty")]
    for name, fails_at in (team or {}).items():
        verdict = verdicts.get(name) or {}
        status = verdict.get("status")
        result.scores[name] = verdict.get("score") if status == "ok" else None
        if status == "ok" and verdict.get("score") is not None and verdict["score"] <= fails_at:
            result.failed_by.append(name)
        elif status == "empty":  # a text it needs is missing: not judged by it, and said
            result.notes.append(verdict.get("error") or f"not judged by {name}")
        elif status != "ok":
            errors.append(name)
    relevancy, correctness = verdicts[RELEVANCY], verdicts[CORRECTNESS]
    result.scores[RELEVANCY] = relevancy.get("score")
    result.scores[CORRECTNESS] = correctness.get("score")
    if relevancy.get("status") == "ok" and relevancy["score"] <= relevancy_threshold:
        result.failed_by.append(RELEVANCY)
    if correctness.get("status") == "ok" and correctness["score"] < 2:
        result.failed_by.append(CORRECTNESS)
    straight = grounded_grades(verdicts[GROUNDED].get("raw_output"))
    swapped = grounded_grades(verdicts[GROUNDED_SWAPPED].get("raw_output"))
    orders = []
    if straight is not None and GROUNDED not in errors:
        orders.append(grounded_order(candidate=straight[1], expected=straight[0]))
    if swapped is not None and GROUNDED_SWAPPED not in errors:
        orders.append(grounded_order(candidate=swapped[0], expected=swapped[1]))
    result.scores[GROUNDED] = [straight[1] if straight else None, swapped[0] if swapped else None]
    if len(orders) == 2 and orders[0] != orders[1]:
        result.notes.append("the grounded judge's two orders disagree")
    elif orders and orders[0] == FAIL:
        result.failed_by.append(GROUNDED)
    if errors:
        result.notes.append("no verdict from " + ", ".join(errors))
    if result.failed_by:
        result.outcome = FAIL
    elif errors:
        result.outcome = ERROR
    elif any(note == "the grounded judge's two orders disagree" for note in result.notes):
        result.outcome = UNCERTAIN
    return result


def wilson_interval(passed: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a pass rate (sound at 0, 1 and few items, unlike p ± z·se)."""
    if total == 0:
        return 0.0, 1.0
    p = passed / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)


def mark_changes(results: Iterable[ItemResult], baseline: Mapping[str, str] | None) -> None:
    """Mark each result against the baseline's outcomes (item key → outcome): improved (it failed, now passes),
    regressed (it passed, now fails), new (not in the baseline)."""
    if baseline is None:
        return
    for result in results:
        before = baseline.get(result.key)
        if before is None:
            result.change = NEW
        elif before == PASS and result.outcome == FAIL:
            result.change = REGRESSED
        elif before in (FAIL, ERROR) and result.outcome == PASS:
            result.change = IMPROVED


@dataclass(frozen=True)
class Summary:
    items: int
    passed: int
    failed: int
    uncertain: int
    errors: int
    pass_rate: float
    interval: tuple[float, float]
    means: dict[str, float | None]
    improved: int
    regressed: int
    # A team judge's items: name → (passed, judged): its own pass rate beside the run's.
    team: dict[str, tuple[int, int]] = field(default_factory=dict)

    def team_interval(self, name: str) -> tuple[float, float]:
        passed, judged = self.team[name]
        return wilson_interval(passed, judged)


def summarize(results: list[ItemResult], team: Iterable[str] = ()) -> Summary:
    outcomes = [r.outcome for r in results]
    passed = outcomes.count(PASS)

    def mean(values: list[Any]) -> float | None:
        numbers = [v for v in values if isinstance(v, int | float)]
        return sum(numbers) / len(numbers) if numbers else None

    means = {
        RELEVANCY: mean([r.scores.get(RELEVANCY) for r in results]),
        CORRECTNESS: mean([r.scores.get(CORRECTNESS) for r in results]),
        GROUNDED: mean([grade for r in results for grade in r.scores.get(GROUNDED) or []]),
    }
    return Summary(
        items=len(results),
        passed=passed,
        failed=outcomes.count(FAIL),
        uncertain=outcomes.count(UNCERTAIN),
        errors=outcomes.count(ERROR),
        pass_rate=passed / len(results) if results else 0.0,
        interval=wilson_interval(passed, len(results)),
        means=means,
        improved=sum(1 for r in results if r.change == IMPROVED),
        regressed=sum(1 for r in results if r.change == REGRESSED),
        team={name: _team_counts(results, name) for name in team},
    )


def _team_counts(results: list[ItemResult], name: str) -> tuple[int, int]:
    judged = [r for r in results if r.scores.get(name) is not None]
    return sum(1 for r in judged if name not in r.failed_by), len(judged)


def exit_status(summary: Summary, min_pass: float) -> int:
    """0: good enough; 1: the pass rate is below --min-pass, or an item that passed in the baseline now fails."""
    return 1 if summary.pass_rate < min_pass or summary.regressed else 0
