"""Any OpenAI-compatible endpoint: the real `openai` SDK against the fake answering as llama-cpp-python, a proxy
without response_format, or a reasoning model (tests/fakes/openai_compat.py). Structured output steps down,
every reply is bounded, usage is taken as given, and a slow server is not stormed."""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

from judges import (
    CorrectnessJudge,
    GroundedJudge,
    Judge,
    LLMClient,
    RelevancyJudge,
    TransientLLMError,
    Verdict,
    get_judge,
)
from judges.gate import EndpointGate
from judges.modes import EndpointMode, LocalModes
from tests.bursts import burst
from tests.fakes.openai_compat import format_of
from tests.fakes.openai_server import FakeOpenAI
from tests.integration.test_judges_client import ANSWER, QUESTION, REFERENCE, client_for, fake, server

__all__ = ["fake", "server"]  # the shared fake, as fixtures


def formats(fake: FakeOpenAI) -> list[str | None]:
    return [format_of(body) for body in fake.requests]


def test_llama_cpp_python_500_on_json_schema_steps_down_to_json_mode_with_the_schema(fake: FakeOpenAI) -> None:
    fake.set_behavior(server_kind="llama-cpp-python")
    client = client_for(fake)
    verdict = RelevancyJudge().evaluate(client, QUESTION, ANSWER)
    assert verdict.status == "ok" and verdict.score == 4
    assert formats(fake) == ["json_schema", "json_object+schema"]  # the 500 named the format: not retried
    assert fake.statuses == {500: 1, 200: 1}
    schema = fake.requests[1]["response_format"]["schema"]
    assert set(schema["required"]) == {"score", "reasoning"}
    assert client.mode_for().response_format == "json_object_schema"
    # Usage as llama-cpp-python gives it: no prompt_tokens_details, so nothing is known of caching.
    assert verdict.prompt_tokens and verdict.completion_tokens and verdict.cached_tokens is None
    fake.reset()
    grounded = GroundedJudge().evaluate(client, QUESTION, ANSWER, REFERENCE)
    assert grounded.status == "ok" and formats(fake) == ["json_object+schema"]  # remembered: no failing try


def judged_through_a_proxy(fake: FakeOpenAI) -> tuple[LLMClient, Verdict]:
    """One relevancy call through a proxy that knows no response_format: (the client, its verdict)."""
    fake.set_behavior(server_kind="proxy")
    client = client_for(fake)
    return client, RelevancyJudge().evaluate(client, QUESTION, "a partial reply")


def test_a_proxy_without_response_format_gets_plain_completions(fake: FakeOpenAI) -> None:
    client, verdict = judged_through_a_proxy(fake)
    assert verdict.status == "ok" and verdict.score == 2
    assert formats(fake) == ["json_schema", None]  # "response_format" refused as such: straight to plain
    assert client.mode_for().response_format == "plain"


def test_a_proxy_that_reports_no_usage_leaves_the_token_counts_unknown(fake: FakeOpenAI) -> None:
    _, verdict = judged_through_a_proxy(fake)
    assert (verdict.prompt_tokens, verdict.cached_tokens, verdict.completion_tokens) == (None, None, None)


def judged_after_a_genuine_500(fake: FakeOpenAI) -> LLMClient:
    """A client whose first call met a 500 that names no request format: a server fault, not a refusal."""
    fake.set_behavior(fault_first=1, faults=["500"])
    client = client_for(fake)
    assert RelevancyJudge().evaluate(client, QUESTION, ANSWER).status == "ok"
    return client


def test_a_genuine_500_is_retried(fake: FakeOpenAI) -> None:
    judged_after_a_genuine_500(fake)
    assert formats(fake) == ["json_schema", "json_schema"] and fake.statuses == {500: 1, 200: 1}


def test_a_genuine_500_changes_no_mode(fake: FakeOpenAI) -> None:
    client = judged_after_a_genuine_500(fake)
    assert client.mode_for().response_format == "json_schema"


def test_a_reasoning_model_gets_max_completion_tokens_once_max_tokens_is_refused(fake: FakeOpenAI) -> None:
    fake.set_behavior(server_kind="openai-reasoning")
    client = client_for(fake)
    assert CorrectnessJudge().evaluate(client, QUESTION, ANSWER, REFERENCE).status == "ok"
    first, second = fake.requests
    assert first["max_tokens"] == CorrectnessJudge.max_reply_tokens and "max_completion_tokens" not in first
    assert second["max_completion_tokens"] == CorrectnessJudge.max_reply_tokens and "max_tokens" not in second
    fake.reset()
    assert RelevancyJudge().evaluate(client, QUESTION, ANSWER).status == "ok"
    (body,) = fake.requests  # remembered, and a plain call's lesson kept the structured output
    assert body["max_completion_tokens"] == RelevancyJudge.max_reply_tokens
    assert body["response_format"]["type"] == "json_schema"


RAMBLE = "Let me think about this answer step by step. " * 400 + "The rating is: [[2]]"  # past every bound


def judged_on_a_ramble(fake: FakeOpenAI, name: str) -> tuple[Judge, Verdict]:
    """The judge `name` asked once of a server that rambles on until the reply's bound cuts it."""
    judge = get_judge(name)
    fake.set_reply(lambda body: RAMBLE)
    return judge, judge.evaluate(client_for(fake), QUESTION, ANSWER, REFERENCE)


@pytest.mark.parametrize("name", ["relevancy", "correctness", "grounded"])
def test_every_call_bounds_its_reply(fake: FakeOpenAI, name: str) -> None:
    judge, _ = judged_on_a_ramble(fake, name)
    (body,) = fake.requests
    assert body["max_tokens"] == judge.max_reply_tokens


@pytest.mark.parametrize("name", ["relevancy", "correctness", "grounded"])
def test_a_cut_reply_is_an_error_with_its_text(fake: FakeOpenAI, name: str) -> None:
    judge, verdict = judged_on_a_ramble(fake, name)
    assert verdict.status == "error" and verdict.score is None
    assert f"cut at its bound of {judge.max_reply_tokens} tokens" in verdict.error
    assert verdict.raw_output and RAMBLE.startswith(verdict.raw_output)  # kept as received, never guessed from
    assert verdict.completion_tokens == judge.max_reply_tokens


def test_json_mode_is_validated_a_score_outside_the_scale_is_an_error_never_clamped(fake: FakeOpenAI) -> None:
    """llama-cpp-python's JSON mode follows the schema's shape but not its bounds: a 10 on the 1–5 scale."""
    fake.set_behavior(server_kind="llama-cpp-python")
    graded = {"answer_affirms_no_document_answers": False, "answer_relevancy_justification": "On topic."}
    reply = json.dumps({"answer_1": {**graded, "answer_relevancy": 5}, "answer_2": {**graded, "answer_relevancy": 10}})
    fake.set_reply(lambda body: reply if body.get("response_format") else None)
    verdict = GroundedJudge().evaluate(client_for(fake), QUESTION, ANSWER, REFERENCE)
    assert verdict.status == "error" and verdict.score is None and verdict.normalized_score is None
    assert "less than or equal to 5" in verdict.error and verdict.raw_output == reply


def test_a_new_model_behind_the_same_name_is_probed_again(fake: FakeOpenAI) -> None:
    fake.set_behavior(server_kind="llama-cpp-python", served_model="smollm2-v1")
    client = client_for(fake)
    RelevancyJudge().evaluate(client, QUESTION, ANSWER)
    assert client.mode_for() == EndpointMode("json_object_schema", "max_tokens", "smollm2-v1")
    fake.set_behavior(served_model="smollm2-v2")  # upgraded: an OpenAI-like server now
    fake.reset()
    RelevancyJudge().evaluate(client, QUESTION, "another answer")
    assert formats(fake) == ["json_object+schema", "json_object"]  # asked as known; its reply names another model
    assert client.mode_for() == EndpointMode()  # forgotten: the next call tries the best again
    RelevancyJudge().evaluate(client, QUESTION, "a third answer")
    assert formats(fake)[-1] == "json_schema" and client.mode_for().served_model == "smollm2-v2"


def test_a_remembered_mode_lasts_a_day() -> None:
    now = [0.0]
    modes = LocalModes(clock=lambda: now[0])
    modes.put("http://llm/v1", "m", EndpointMode("json_object"))
    now[0] = 86_399.0
    assert modes.get("http://llm/v1", "m") == EndpointMode("json_object")
    assert modes.get("http://llm/v1", "other-model") is None
    now[0] = 86_400.0
    assert modes.get("http://llm/v1", "m") is None


def test_a_one_at_a_time_server_sees_one_call_at_a_time(fake: FakeOpenAI) -> None:
    fake.set_behavior(server_kind="llama-cpp-python", latency_ms=50)
    client = client_for(fake, concurrency=1)
    verdicts = burst(lambda n: RelevancyJudge().evaluate(client, QUESTION, f"answer {n}"), range(12), workers=12)
    assert all(v.status == "ok" for v in verdicts)
    assert fake.statuses[200] == 12
    root = fake.base_url.removesuffix("/v1")
    with urllib.request.urlopen(f"{root}/_admin/stats", timeout=5) as response:
        assert json.load(response)["most_in_flight"] == 1  # nothing queued at the server to time out there


def test_a_timeout_backs_off_instead_of_piling_on(fake: FakeOpenAI) -> None:
    fake.set_behavior(fault_first=1, faults=["timeout"], timeout_seconds=1.0)
    gate = EndpointGate(4, cooldown_base=0.6)
    client = client_for(fake, timeout=0.3, max_retries=0, gate=gate)
    with pytest.raises(TransientLLMError, match="timeout") as caught:
        RelevancyJudge().evaluate(client, QUESTION, ANSWER)
    assert caught.value.retry_after == 0.6  # the pipeline's retry waits at least the cooldown
    assert gate.allowed == 2  # halved
    done = threading.Event()
    threading.Thread(target=lambda: (RelevancyJudge().evaluate(client, QUESTION, "again"), done.set())).start()
    assert done.wait(10)
    first, second = fake.request_times
    assert second - first >= 0.3 + 0.5  # the timeout (0.3 s), then held back for the cooldown: not sent at once
    assert gate.allowed == 3  # a success lets one more call out again
    deadline = time.monotonic() + 10  # let the abandoned request's late answer land in this test's counts
    while fake.statuses.get(200, 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)


def test_the_gate_refuses_a_call_beyond_its_bound_as_saturated() -> None:
    gate = EndpointGate(2, cooldown_base=2.0, clock=lambda: 0.0)
    with gate.slot(1.0), gate.slot(1.0):
        assert gate.in_flight == 2
        with pytest.raises(TransientLLMError, match="saturated") as caught, gate.slot(0.0):
            pass
        assert caught.value.retry_after == 2.0


def test_the_gate_backs_off_after_timeouts_until_successes_let_calls_out_again() -> None:
    now = [0.0]
    gate = EndpointGate(2, cooldown_base=2.0, clock=lambda: now[0])
    assert gate.timed_out() == 2.0 and gate.timed_out() == 4.0  # doubling cooldowns, allowed down to one
    assert gate.allowed == 1
    with pytest.raises(TransientLLMError), gate.slot(0.0):  # cooling down
        pass
    now[0] = 4.0
    with gate.slot(0.0):
        pass
    gate.succeeded()
    gate.succeeded()
    assert (gate.allowed, gate.timeouts_in_a_row) == (2, 0)
