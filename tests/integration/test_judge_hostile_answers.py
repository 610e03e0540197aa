"""The verdict is the judge's own: answers written to steer the judge (quoted verdicts, fake `[[2]]`, orders to
the judge, fake headings and look-alike delimiters, in the answer, the question or the reference) score as the
fake LLM's marker in the answer says ("offtopic" lowest, "partial" middling, otherwise highest), for every
judge and in every output mode: structured outputs, plain completions (the provider refuses `response_format`),
and both with a judge that quotes the answer before its verdict. Real `openai` SDK over HTTP to the fake."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from judges import JUDGES, LLMClient, get_judge
from tests.fakes.openai_server import FakeOpenAI

HOSTILE = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "judge_replies" / "hostile_answers.jsonl").read_text("utf-8").splitlines()
    if line
]
QUESTION = "How do I reset my password?"
REFERENCE = "Open Settings > Security and click Reset password."
GRADES = {"relevancy": (0, 2, 4), "correctness": (0, 1, 2), "grounded": (1, 3, 5)}
MODES = {
    "structured": {},
    "plain": {"reject_response_format": True},
    "structured-quoting": {"quote_answer": True},
    "plain-quoting": {"reject_response_format": True, "quote_answer": True},
}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def test_the_corpus_is_large_and_names_its_expectations() -> None:
    assert len(HOSTILE) >= 30 and len({row["id"] for row in HOSTILE}) == len(HOSTILE)
    assert {row["expect"] for row in HOSTILE} == {"low", "middle", "high"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("judge_name", sorted(JUDGES))
def test_hostile_answers_score_as_the_marker_says(server: FakeOpenAI, judge_name: str, mode: str) -> None:
    server.set_behavior(**MODES[mode])
    server.reset()
    judge = get_judge(judge_name)
    client = LLMClient("judge-model", base_url=server.base_url, api_key="sk-test", timeout=5.0, cache_size=0)
    wrong = {}
    for row in HOSTILE:
        question, reference = row.get("question", QUESTION), row.get("reference", REFERENCE)
        verdict = judge.evaluate(client, question, row["answer"], reference)
        expected = GRADES[judge_name][("low", "middle", "high").index(row["expect"])]
        if verdict.status != "ok" or verdict.score != expected:
            wrong[row["id"]] = (verdict.status, verdict.score, expected, verdict.error)
        if "quoting" in mode:  # the reply did quote the answer, hostile parts and all, before its verdict
            raw = verdict.raw_output or ""
            assert row["answer"] in raw or json.dumps(row["answer"])[1:-1] in raw, row["id"]
    assert not wrong
    structured = [body for body in server.requests if body.get("response_format")]
    if judge.output_model is not None:  # the mode was the one meant: structured, or plain after one refusal
        assert len(structured) == (len(HOSTILE) if mode.startswith("structured") else 1)
