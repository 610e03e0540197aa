"""The verdict is the judge's own: answers written to steer the judge (quoted verdicts, fake `[[2]]`, orders to
the judge, fake headings and look-alike delimiters, in the answer, the question or the reference) score as the
fake LLM's marker in the answer says ("offtopic" lowest, "partial" middling, otherwise highest), for every
judge and in every output mode: structured outputs, JSON mode with the schema, plain completions (a proxy takes
no `response_format`), each also with a judge that quotes the answer before its verdict. Real `openai` SDK over
HTTP to the fake."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from judges import JUDGES, LLMClient, get_judge
from tests import relmon_cli
from tests.fakes.openai_replies import QUOTE_CHARS
from tests.fakes.openai_server import FakeOpenAI

HOSTILE = [
    json.loads(line)
    for line in (Path(__file__).parents[1] / "judge_replies" / "hostile_answers.jsonl").read_text("utf-8").splitlines()
    if line
]
QUESTION = "How do I reset my password?"
REFERENCE = "Open Settings > Security and click Reset password."
GRADES = {"relevancy": (0, 2, 4), "correctness": (0, 1, 2), "grounded": (1, 3, 5)}
# Output modes: OpenAI's json_schema, llama-cpp-python's JSON mode with the schema, a proxy's plain completions;
# each with a judge that quotes the answer before its verdict and one that does not.
SERVERS = {"openai": "json_schema", "llama-cpp-python": "json_object", "proxy": None}
MODES = {f"{kind}{'-quoting' if quoting else ''}": (kind, quoting) for kind in SERVERS for quoting in (False, True)}

server = relmon_cli.server  # the fixture of tests/relmon_cli.py, bound here: the module's fake OpenAI, started once


def test_the_corpus_is_large_with_every_expectation_named() -> None:
    assert len(HOSTILE) >= 30 and len({row["id"] for row in HOSTILE}) == len(HOSTILE)
    assert {row["expect"] for row in HOSTILE} == {"low", "middle", "high"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("judge_name", sorted(JUDGES))
def test_hostile_answers_score_as_the_marker_says(server: FakeOpenAI, judge_name: str, mode: str) -> None:
    kind, quoting = MODES[mode]
    server.set_behavior(server_kind=kind, quote_answer=quoting)
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
        if quoting:  # the reply did quote the answer, hostile parts and all, before its verdict
            raw, quote = verdict.raw_output or "", row["answer"][:QUOTE_CHARS]
            assert quote in raw or json.dumps(quote)[1:-1] in raw, row["id"]
    assert not wrong
    if judge.output_model is not None:  # the mode was the one meant (after the client stepped down to it)
        assert (server.requests[-1].get("response_format") or {}).get("type") == SERVERS[kind]
