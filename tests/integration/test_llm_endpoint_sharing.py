"""What relmon learns about its LLM endpoint is shared by every process (Redis) and every thread (one gate per
endpoint), and `relmon doctor` says what the endpoint takes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from common.llm import RedisModes, default_concurrency, gate_for, llm_client_for
from judges import RelevancyJudge
from judges.modes import EndpointMode
from relmon.doctor.checks import check_llm
from tests.builders import installed_runtime, make_settings
from tests.fakes.openai_compat import format_of
from tests.fakes.openai_server import FakeOpenAI
from tests.services import free_port


@pytest.fixture
def llama(redis_url: str) -> Iterator[FakeOpenAI]:
    redis.Redis.from_url(redis_url).flushdb()
    with FakeOpenAI(server_kind="llama-cpp-python") as fake:
        yield fake


def test_what_one_process_learns_every_other_uses(llama: FakeOpenAI, redis_url: str) -> None:
    settings = make_settings(openai_base_url=llama.base_url, redis_url=redis_url)
    first = llm_client_for(settings, redis_client=redis.Redis.from_url(redis_url), max_retries=0)
    assert RelevancyJudge().evaluate(first, "How do I reset it?", "Settings > Reset.").status == "ok"
    assert [format_of(body) for body in llama.requests] == ["json_schema", "json_object+schema"]
    llama.reset()
    other_process = llm_client_for(settings, redis_client=redis.Redis.from_url(redis_url), max_retries=0)
    assert RelevancyJudge().evaluate(other_process, "And my email?", "Settings > Email.").status == "ok"
    assert [format_of(body) for body in llama.requests] == ["json_object+schema"]  # no failing try
    stored = redis.Redis.from_url(redis_url)
    key = RedisModes.key(other_process.base_url, settings.judge_model)
    assert EndpointMode.from_json(stored.get(key)).response_format == "json_object_schema"
    assert 86_000 < stored.ttl(key) <= 86_400  # probed again after a day


def test_without_redis_the_process_keeps_what_it_learned(llama: FakeOpenAI, redis_url: str) -> None:
    dead = redis.Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
    client = llm_client_for(
        make_settings(openai_base_url=llama.base_url, redis_url=redis_url), redis_client=dead, max_retries=0
    )
    for answer in ("one", "two"):
        assert RelevancyJudge().evaluate(client, "Question?", answer).status == "ok"
    assert [format_of(body) for body in llama.requests] == ["json_schema", "json_object+schema", "json_object+schema"]


def test_the_doctors_finding_of_the_endpoint_mode_is_shared_with_the_workers(llama: FakeOpenAI, redis_url: str) -> None:
    check = check_llm(make_settings(openai_base_url=llama.base_url, redis_url=redis_url, llm_concurrency=1))
    assert check.status == "ok", check.line()
    assert "JSON mode with the schema (json_object + schema), reply bound max_tokens" in check.detail
    assert "1 call(s) in flight per process (RELMON_LLM_CONCURRENCY)" in check.detail
    assert all(body["max_tokens"] == 32 for body in llama.requests)  # bounded as a judge's call is
    llama.reset()
    worker = llm_client_for(
        make_settings(openai_base_url=llama.base_url, redis_url=redis_url),
        redis_client=redis.Redis.from_url(redis_url),
        max_retries=0,
    )
    RelevancyJudge().evaluate(worker, "Question?", "Answer.")
    assert [format_of(body) for body in llama.requests] == ["json_object+schema"]


def test_doctor_names_a_refused_key(llama: FakeOpenAI, redis_url: str) -> None:
    llama.set_behavior(server_kind="llama-cpp-python", api_key="sk-right")
    check = check_llm(make_settings(openai_base_url=llama.base_url, redis_url=redis_url))
    assert check.failed and "rejected the key" in check.detail and "(401)" in check.detail


@pytest.mark.parametrize(
    ("base_url", "expected"),
    [
        (None, 64),  # OpenAI
        ("https://my-resource.openai.azure.com/openai/deployments/judge", 64),
        ("https://generativelanguage.googleapis.com/v1beta/openai/", 64),
        ("http://localhost:11434/v1", 1),  # Ollama
        ("http://127.0.0.1:1234/v1", 1),  # LM Studio
        ("http://localhost:8080/v1", 1),  # llama.cpp's llama-server
        ("http://llm:8000/v1", 1),  # llama-cpp-python (or vLLM) as a compose service
        ("http://gpu-box.internal:8000/v1", 64),  # a named host: a server of its own, set the bound for it
        ("http://127.0.0.1:40123/v1", 64),  # an unknown port
    ],
)
def test_calls_in_flight_are_sized_per_endpoint_kind(base_url: str | None, expected: int) -> None:
    assert default_concurrency(base_url, threads=64) == expected


def test_one_gate_per_endpoint_in_a_process() -> None:
    assert gate_for("http://localhost:11434/v1", 1) is gate_for("http://localhost:11434/v1", 1)
    assert gate_for("http://localhost:11434/v1", 1) is not gate_for("http://localhost:1234/v1", 1)


def test_a_judgment_from_a_server_that_does_not_say_stores_unknown_not_zero(
    settings_for, llama: FakeOpenAI, database
) -> None:
    """llama-cpp-python sends no prompt_tokens_details: the stored judgment's cached count is NULL, its other
    counts as given; a proxy without usage stores all three as NULL."""
    from sqlalchemy import select

    from store.models import Judgment, PairStatus
    from tests.pipeline_helpers import add_pairs
    from workers.tasks.judging import judge_pair

    with installed_runtime(
        settings_for(
            openai_base_url=llama.base_url,
            openai_api_key="sk-test",
            llm_max_retries=0,
        )
    ):
        first = add_pairs(database, 1, question="How do I reset?", answer="Use the Reset button.")[0]
        assert judge_pair.apply(args=[first]).get() == PairStatus.JUDGED
        llama.set_behavior(server_kind="proxy")
        second = add_pairs(database, 1, start=5, question="And my email?", answer="Settings > Email.")[0]
        assert judge_pair.apply(args=[second]).get() == PairStatus.JUDGED
    with database.session() as session:
        rows = {
            row.pair_id: (row.status, row.prompt_tokens, row.cached_tokens, row.completion_tokens)
            for row in session.scalars(select(Judgment))
        }
    status, prompt, cached, completion = rows[first]
    assert status == "ok" and prompt and completion and cached is None
    assert rows[second] == ("ok", None, None, None)
