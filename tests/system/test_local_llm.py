"""relmon against a real local LLM server, not the project's fake: llama-cpp-python's server serving
SmolLM2-135M-Instruct (tests/local_llm.py). Skipped when the server package or the model is not installed (CI
does not compile llama.cpp); `python -m bench.local_llm` runs the same against more samples and prints figures.

A 135M model is a poor judge: what is checked is that every call ends in a verdict or a flagged error verdict
(its raw reply kept), never an endpoint failure, within the reply bound, and with usage as the server gives it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from judges import get_judge
from store.db import Database
from tests.fakes.slack_server import FakeSlack
from tests.local_llm import MODEL_ALIAS, SAMPLES, LlamaServer, judged_by_worker, local_env, missing, relmon_judge
from tests.processes import start_worker

pytestmark = [pytest.mark.slow, pytest.mark.skipif(missing() is not None, reason=f"not installed: {missing()}")]


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server = LlamaServer.start(tmp_path_factory.mktemp("llama"))
    yield server
    server.stop()


def assert_verdict_or_flagged_error(verdict: dict, judge_name: str) -> None:
    judge = get_judge(judge_name)
    assert verdict["status"] in ("ok", "null", "error"), verdict
    if verdict["status"] == "error":
        assert verdict["error"] and verdict["raw_output"] is not None, verdict  # flagged, the reply kept
        assert "LLM endpoint" not in verdict["error"], verdict  # the judge's reply, not the endpoint, failed
    elif verdict["status"] == "ok":
        assert judge.min_score <= verdict["score"] <= judge.max_score
    assert verdict["completion_tokens"] <= judge.max_reply_tokens  # bounded
    assert verdict["prompt_tokens"] and verdict["cached_tokens"] is None  # no prompt_tokens_details: unknown


@pytest.mark.parametrize("judge", ["relevancy", "correctness", "grounded"])
def test_relmon_judge_ends_in_a_verdict_never_an_endpoint_failure(
    llama: LlamaServer, judge: str, tmp_path: Path
) -> None:
    env = local_env(llama.base_url, MODEL_ALIAS, tmp_path)
    question, answer, reference = SAMPLES[0]
    run = relmon_judge(env, judge, question, answer, reference)
    assert not run.endpoint_failed, run.stderr
    assert_verdict_or_flagged_error(run.verdict, judge)
    assert run.exit_code == (0 if run.verdict["status"] in ("ok", "null") else 1)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_pair_judged_by_a_real_worker(
    llama: LlamaServer, redis_url: str, db_url: str, database: Database, tmp_path: Path, producer
) -> None:
    question, answer, _ = SAMPLES[1]
    with FakeSlack() as slack:
        env = local_env(
            llama.base_url, MODEL_ALIAS, tmp_path, redis_url=redis_url, database_url=db_url, slack_api_url=slack.api_url
        )
        worker = start_worker(env, log_dir=tmp_path, timeout=120)
        try:
            rows = judged_by_worker(database, producer, question, answer)
        finally:
            worker.stop()
    assert [row["judge"] for row in rows] == ["relevancy"]
    assert_verdict_or_flagged_error(rows[0], "relevancy")
    assert rows[0]["model"] == MODEL_ALIAS
