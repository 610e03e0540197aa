"""relmon regress's pure rules: the grounded judge's two orders, an item's outcome, Wilson's interval, the baseline,
the exit status, and the candidates file read line by line."""

from __future__ import annotations

import io
import json

import pytest

from golden.candidates import CandidatesProblem, read_candidates
from golden.regress import (
    ERROR,
    FAIL,
    IMPROVED,
    NEW,
    PASS,
    REGRESSED,
    UNCERTAIN,
    ItemResult,
    check_texts,
    exit_status,
    grounded_order,
    item_result,
    mark_changes,
    summarize,
    wilson_interval,
)


def grounded(first: int | None, second: int | None) -> dict:
    def grade(value):
        return {"answer_affirms_no_document_answers": value is None, "answer_relevancy_justification": "j",
                "answer_relevancy": value}  # fmt: skip

    return {
        "status": "ok",
        "score": second,
        "raw_output": json.dumps({"answer_1": grade(first), "answer_2": grade(second)}),
    }


def verdicts(relevancy=4, correctness=2, straight=(5, 5), swapped=(5, 5)) -> dict:
    return {
        "relevancy": {"status": "ok", "score": relevancy},
        "correctness": {"status": "ok", "score": correctness},
        "grounded": grounded(*straight),
        "grounded_swapped": grounded(*swapped),
    }


def test_the_swapped_check_puts_the_candidate_first() -> None:
    assert check_texts("grounded", "Q", "cand", "exp") == ("Q", "cand", "exp")
    assert check_texts("grounded_swapped", "Q", "cand", "exp") == ("Q", "exp", "cand")
    assert check_texts("relevancy", "Q", "cand", "exp") == ("Q", "cand", None)


def test_one_orders_outcome() -> None:
    assert grounded_order(candidate=4, expected=5) == PASS  # good in itself
    assert grounded_order(candidate=3, expected=3) == PASS  # as good as the expected answer
    assert grounded_order(candidate=2, expected=3) == FAIL
    assert grounded_order(candidate=None, expected=5) == FAIL  # "no document" for a question that has an answer
    assert grounded_order(candidate=2, expected=None) == PASS


def test_an_items_outcome() -> None:
    assert item_result("1", verdicts(), relevancy_threshold=2).outcome == PASS
    low = item_result("1", verdicts(relevancy=2, correctness=1), relevancy_threshold=2)
    assert low.outcome == FAIL and low.failed_by == ["relevancy", "correctness"]
    # position bias: straight (expected 5 first, candidate 2 second) fails, swapped (candidate 5 first) passes
    biased = item_result("1", verdicts(straight=(5, 2), swapped=(5, 2)), relevancy_threshold=2)
    assert biased.outcome == UNCERTAIN and biased.scores["grounded"] == [2, 5]
    both_fail = item_result("1", verdicts(straight=(5, 2), swapped=(2, 5)), relevancy_threshold=2)
    assert both_fail.outcome == FAIL and both_fail.failed_by == ["grounded"]
    broken = verdicts()
    broken["correctness"] = {"status": "error", "score": None, "error": "unreadable"}
    assert item_result("1", broken, relevancy_threshold=2).outcome == "error"


def test_wilsons_interval() -> None:
    low, high = wilson_interval(2, 5)
    assert round(low, 4) == 0.1176 and round(high, 4) == 0.7693
    assert wilson_interval(0, 0) == (0.0, 1.0)
    low, high = wilson_interval(10, 10)
    assert high == 1.0 and 0.72 < low < 0.73


def against_the_baseline() -> list[ItemResult]:
    """Four results compared with a baseline: improved, regressed, unchanged, new."""
    results = [ItemResult("1", PASS), ItemResult("2", FAIL), ItemResult("3", FAIL), ItemResult("4", PASS)]
    mark_changes(results, {"1": FAIL, "2": PASS, "3": FAIL})
    return results


def test_the_baseline() -> None:
    results = against_the_baseline()
    assert [r.change for r in results] == [IMPROVED, REGRESSED, None, NEW]
    summary = summarize(results)
    assert (summary.passed, summary.improved, summary.regressed, summary.pass_rate) == (2, 1, 1, 0.5)


def test_the_exit_status() -> None:
    results = against_the_baseline()
    summary = summarize(results)
    assert exit_status(summary, 0.5) == 1  # an item that passed now fails
    results[1].change = None
    assert exit_status(summarize(results), 0.5) == 0
    assert exit_status(summarize(results), 0.51) == 1


ITEMS = {1: "How do I reset my password?", 2: "Which plans include SSO?", 3: "Which plans include SSO"}


def test_a_csv_file_by_id_or_question_with_its_line_numbers() -> None:
    text = "\ufeffid,question,answer\n1,,Settings.\n,how do I reset my password,again\n,Where is it?,x\n"
    with pytest.raises(CandidatesProblem) as problem:
        read_candidates(io.BytesIO(text.encode()), ITEMS)
    assert str(problem.value).splitlines() == [
        "line 3: item 1 again (first on line 2): one answer per item",
        "line 4: no golden item asks 'Where is it?': give its `id`",
    ]
    found = read_candidates(
        io.BytesIO(b"question,answer\nWhich plans include SSO?,Business\n"), {1: ITEMS[1], 2: ITEMS[2]}
    )
    assert [(c.line, c.item_id, c.answer) for c in found] == [(2, 2, "Business")]
    with pytest.raises(CandidatesProblem, match="2 golden items ask"):
        read_candidates(io.BytesIO(b"question,answer\nWhich plans include SSO?,Business\n"), ITEMS)
    with pytest.raises(CandidatesProblem, match="line 1: no candidate answers"):
        read_candidates(io.BytesIO(b"\n\n"), ITEMS)


def test_a_team_judge_fails_an_item_at_or_below_its_fails_at() -> None:
    team = {"refund_policy": 0.0, "tone": 2.0}
    passing = verdicts() | {"refund_policy": {"status": "ok", "score": 1}, "tone": {"status": "ok", "score": 3}}
    assert item_result("a", passing, relevancy_threshold=2, team=team).outcome == PASS
    failing = passing | {"refund_policy": {"status": "ok", "score": 0}, "tone": {"status": "ok", "score": 2}}
    result = item_result("b", failing, relevancy_threshold=2, team=team)
    assert result.outcome == FAIL and result.failed_by == ["refund_policy", "tone"]
    assert result.scores["refund_policy"] == 0 and result.scores["tone"] == 2
    errored = item_result("c", passing | {"tone": {"status": "error", "error": "bad reply"}}, relevancy_threshold=2,
                          team=team)  # fmt: skip
    assert errored.outcome == ERROR and "no verdict from tone" in errored.notes
    not_needed = {"status": "empty", "error": "not judged by tone: the pair has no {documents}"}
    skipped = item_result("d", passing | {"tone": not_needed}, relevancy_threshold=2, team=team)
    assert skipped.outcome == PASS and skipped.notes == ["not judged by tone: the pair has no {documents}"]
    assert skipped.scores["tone"] is None

    summary = summarize([result, item_result("a", passing, relevancy_threshold=2, team=team), skipped], team)
    assert summary.team == {"refund_policy": (2, 3), "tone": (1, 2)}
    assert summary.team_interval("tone") == wilson_interval(1, 2)
