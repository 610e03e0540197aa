"""What `relmon regress`'s reports say of each golden item beyond its outcome: its question, expected answer and
candidate answer, and each check's score and reasoning, as plain data the formats (relmon.regress.report, .junit)
render. Built once per report with the privacy rule applied: an item whose texts may not be quoted (a private
channel's without --include-private) keeps its scores and statuses and none of its words, since the judges'
reasoning and errors may quote the question and the answers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from golden.regress import CHECKS, GROUNDED_SWAPPED, JUDGE_OF_CHECK, grounded_answers, grounded_grade
from judges.names import GROUNDED

Redact = Callable[[str], str]


@dataclass(frozen=True)
class CheckView:
    """One check's verdict on the candidate. For the grounded checks `score` and `reasoning` are the candidate's
    grade and its justification, `expected_*` the expected answer's, whichever order the check put them in."""

    check: str  # golden.regress.CHECKS
    judge: str
    status: str | None  # ok | null | error | empty; None: no verdict stored
    score: Any
    max_score: Any
    reasoning: str | None  # None: withheld, or none given
    error: str | None = None
    expected_score: Any = None
    expected_reasoning: str | None = None

    def as_json(self) -> dict[str, Any]:
        fields = {"judge": self.judge, "status": self.status, "score": self.score, "max_score": self.max_score,
                  "reasoning": self.reasoning, "error": self.error}  # fmt: skip
        if self.judge == GROUNDED:
            fields |= {"expected_score": self.expected_score, "expected_reasoning": self.expected_reasoning}
        return fields


@dataclass(frozen=True)
class ItemView:
    """A golden item as the reports show it. `withheld`: a private channel's, its texts left out (all None)."""

    key: str
    question: str | None
    expected: str | None
    answer: str | None  # None for an item missing from the candidates file
    withheld: bool
    checks: tuple[CheckView, ...] = ()  # none for a missing item

    def texts_json(self) -> dict[str, Any]:
        """The texts and the judges' words, for the report files (not the copy kept in the database)."""
        return {
            "expected": self.expected,
            "answer": self.answer,
            "judges": {check.check: check.as_json() for check in self.checks},
        }


def _check_view(check: str, verdict: Mapping[str, Any], quote: Callable[[Any], str | None]) -> CheckView:
    judge = JUDGE_OF_CHECK.get(check, check)  # a team judge's check is named after it
    base = {"check": check, "judge": judge, "status": verdict.get("status"), "max_score": verdict.get("max_score"),
            "error": quote(verdict.get("error"))}  # fmt: skip
    if judge != GROUNDED:
        return CheckView(score=verdict.get("score"), reasoning=quote(verdict.get("reasoning")), **base)
    answers = grounded_answers(verdict.get("raw_output"))
    if answers is None:  # an unreadable reply (an error verdict): nothing graded either answer
        return CheckView(score=None, reasoning=quote(verdict.get("reasoning")), **base)
    # The straight check grades the candidate as answer 2, the swapped one as answer 1 (golden.regress.check_texts).
    candidate, expected = (answers[0], answers[1]) if check == GROUNDED_SWAPPED else (answers[1], answers[0])
    return CheckView(score=grounded_grade(candidate), reasoning=quote(candidate.answer_relevancy_justification),
                     expected_score=grounded_grade(expected),
                     expected_reasoning=quote(expected.answer_relevancy_justification), **base)  # fmt: skip


def item_view(
    key: str,
    texts: tuple[str, str | None, str | None],
    verdicts: Mapping[str, Mapping[str, Any]] | None,
    *,
    shown: bool,
    redact: Redact,
    checks: Sequence[str] = CHECKS,
) -> ItemView:
    """The view of an item: `texts` its (question, expected answer, candidate answer); `verdicts` check → stored
    verdict (None: missing from the candidates file); `shown` whether its texts may be quoted; `redact` applied to
    every text quoted (the questions, the answers and the judges' words alike); `checks` the run's (the four, then
    the team judges')."""

    def quote(text: Any) -> str | None:
        if not shown or not isinstance(text, str):
            return None
        return redact(text)

    question, expected, answer = texts
    views = () if verdicts is None else tuple(_check_view(name, verdicts.get(name) or {}, quote) for name in checks)
    return ItemView(key, quote(question), quote(expected), quote(answer), not shown, views)
