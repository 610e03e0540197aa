"""relmon regress's verdict: the exit status and the line that says why, from the summary, the items missing from
the candidates file and the options; and what an item's view keeps of the judges' verdicts."""

from __future__ import annotations

import json

from golden.regress import FAIL, PASS, REGRESSED, ItemResult, summarize
from relmon.regress.verdict import decide, percents
from relmon.regress.views import item_view


def summary(passed: int, failed: int, regressed: int = 0):
    results = [ItemResult(str(n), PASS) for n in range(passed)]
    results += [ItemResult(f"f{n}", FAIL, change=REGRESSED if n < regressed else None) for n in range(failed)]
    return summarize(results)


def test_a_good_run_passes_saying_so() -> None:
    verdict = decide(summary(4, 1), 0.8, missing=0, allow_missing=False, baseline=None)
    assert (verdict.code, verdict.line) == (0, "PASS: pass rate 80% ≥ 80% required")
    verdict = decide(summary(5, 0), 0.8, missing=0, allow_missing=False, baseline=7)
    assert verdict.line == "PASS: pass rate 100% ≥ 80% required; nothing regressed since run 7"


def test_a_low_pass_rate_and_missing_items_are_both_said_and_the_regression_wins_the_exit_status() -> None:
    verdict = decide(summary(3, 2), 0.8, missing=1, allow_missing=False, baseline=None)
    assert verdict.code == 1 and not verdict.passed
    assert verdict.line == "FAIL: pass rate 60% < 80% required; 1 item missing (use --allow-missing to run without it)"


def test_missing_items_alone_are_an_input_problem_unless_allowed() -> None:
    verdict = decide(summary(5, 0), 0.8, missing=2, allow_missing=False, baseline=None)
    assert verdict.code == 2
    assert verdict.failing == ("2 items missing (use --allow-missing to run without them)",)
    allowed = decide(summary(5, 0), 0.8, missing=2, allow_missing=True, baseline=None)
    assert allowed.code == 0
    assert allowed.line == "PASS: pass rate 100% ≥ 80% required; 2 items missing, not run (--allow-missing)"


def test_a_regression_fails_a_run_above_the_minimum() -> None:
    verdict = decide(summary(8, 2, regressed=2), 0.5, missing=0, allow_missing=False, baseline="v1.json")
    assert verdict.code == 1
    assert verdict.line == "FAIL: 2 items regressed (passed in v1.json, fail now); pass rate 80% ≥ 50% required"


def test_percentages_keep_the_decimals_that_tell_them_apart() -> None:
    assert percents(0.6, 0.8) == ("60%", "80%")
    assert percents(0.795, 0.8) == ("79.5%", "80.0%")  # not "80% < 80%"
    assert percents(0.8, 0.8) == ("80%", "80%")
    assert percents(2 / 3, 0.6667) == ("66.667%", "66.670%")


def grounded_reply(first: int, second: int) -> str:
    def grade(value: int, why: str) -> dict:
        return {"answer_affirms_no_document_answers": False, "answer_relevancy": value,
                "answer_relevancy_justification": why}  # fmt: skip

    return json.dumps({"answer_1": grade(first, "first's reason"), "answer_2": grade(second, "second's reason")})


VERDICTS = {
    "relevancy": {"status": "ok", "score": 4, "max_score": 4, "reasoning": "on topic"},
    "correctness": {"status": "error", "score": None, "max_score": 2, "error": "unreadable: the candidate says X"},
    "grounded": {"status": "ok", "score": 3, "max_score": 5, "raw_output": grounded_reply(5, 3)},
    "grounded_swapped": {"status": "ok", "score": 5, "max_score": 5, "raw_output": grounded_reply(3, 5)},
}


def test_an_items_view_gives_the_candidates_grade_in_both_grounded_orders() -> None:
    view = item_view("1", ("Q?", "E.", "A."), VERDICTS, shown=True, redact=str.upper)
    checks = {check.check: check for check in view.checks}
    straight, swapped = checks["grounded"], checks["grounded_swapped"]
    assert (straight.score, straight.expected_score, straight.reasoning) == (3, 5, "SECOND'S REASON")  # answer 2
    assert (swapped.score, swapped.expected_score, swapped.reasoning) == (3, 5, "FIRST'S REASON")  # answer 1
    assert checks["correctness"].error == "UNREADABLE: THE CANDIDATE SAYS X"  # redacted like every text
    assert (view.question, view.expected, view.answer) == ("Q?", "E.", "A.")


def test_a_withheld_items_view_keeps_the_scores_and_none_of_the_words() -> None:
    view = item_view("1", ("Q?", "E.", "A."), VERDICTS, shown=False, redact=str.upper)
    assert view.withheld and (view.question, view.expected, view.answer) == (None, None, None)
    assert [check.score for check in view.checks] == [4, None, 3, 3]
    assert all(check.reasoning is None and check.expected_reasoning is None and check.error is None
               for check in view.checks)  # fmt: skip
