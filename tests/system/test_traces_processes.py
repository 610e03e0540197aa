"""Verdicts on the bot's traces through real processes: a signed answer to a real `relmon bot`, judged by a real
`relmon worker`, whose send task puts the score on the trace Langfuse derives from the message (the fake Langfuse,
through the official SDK's client) and counts it on the worker's /metrics."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from langfuse import Langfuse
from prometheus_client.parser import text_string_to_metric_families

from tests import slack_requests as sr
from tests.fakes.langfuse_server import FakeLangfuse
from tests.processes import wait_for
from tests.running_system import CHANNEL, relmon_processes
from tests.services import free_port

pytestmark = pytest.mark.slow


def sent_count(port: int) -> float:
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == "relmon_trace_sends_total" and sample.labels == {"tool": "langfuse", "outcome": "sent"}
    )


def test_a_judged_answer_becomes_a_score_on_the_bots_langfuse_trace(
    redis_url: str, db_url: str, tmp_path: Path
) -> None:
    worker_port = free_port()
    with (
        FakeLangfuse() as langfuse,
        relmon_processes(
            redis_url=redis_url,
            database_url=db_url,
            directory=tmp_path,
            RELMON_SETTLE_SECONDS="0.3",
            RELMON_METRICS_PORT=worker_port,
            RELMON_TRACE_ID_FROM="slack_ts",
            RELMON_LANGFUSE_HOST=langfuse.url,
            RELMON_LANGFUSE_PUBLIC_KEY=langfuse.public_key,
            RELMON_LANGFUSE_SECRET_KEY=langfuse.secret_key,
        ) as system,
    ):
        question = sr.human_message(CHANNEL, sr.next_ts(), "How do I reset my password?")
        answer = sr.bot_message(CHANNEL, sr.next_ts(), "Open Settings > Security > Reset.", thread_ts=question["ts"])
        for event in (question, answer):
            assert system.post_event(event).status_code == 200
        scores = wait_for(lambda: langfuse.stored() or None, timeout=60, what="a score in Langfuse")
        wait_for(lambda: sent_count(worker_port) == 1, timeout=20, what="the send counted on the worker's /metrics")
    (score,) = scores.values()
    assert score["traceId"] == Langfuse.create_trace_id(seed=f"{CHANNEL}:{answer['ts']}")
    assert score["name"] == "relmon.relevancy" and score["dataType"] == "NUMERIC" and 0 <= score["value"] <= 1
